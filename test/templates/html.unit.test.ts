import { expect } from 'chai';
import { validateTemplate } from '../../domain/templates/templates';

/**
 * The HTML checks of a template (docs/TEMPLATES.md "Checks"). Each case passed the checks before
 * those rules.
 */
const errorsOf = (html: string, sampleData: Record<string, string> = {}) =>
  validateTemplate({ name: 'n', subject: 's', type: 'html', body_html: `${html} <a href="{{unsubscribe_url}}">u</a>`, body_text: 't' }, sampleData).errors.map((e) => e.code);

describe('template HTML: script-capable places (unit)', () => {
  it('every URL-bearing attribute, meta refresh, SVG animation values, style url(): javascript_url', () => {
    for (const h of [
      '<object data="javascript:alert(1)"></object>',
      '<video poster="javascript:alert(1)"></video>',
      '<blockquote cite="javascript:alert(1)">q</blockquote>',
      '<img src="x.png" longdesc="javascript:alert(1)">',
      '<a href="https://x.test/" ping="https://x.test/p javascript:alert(1)">x</a>',
      '<object codebase="javascript:alert(1)"></object>',
      '<applet archive="a.jar,javascript:alert(1)"></applet>',
      '<img lowsrc="javascript:alert(1)">',
      '<img dynsrc="javascript:alert(1)">',
      '<img src="x.png" usemap="javascript:alert(1)">',
      '<html manifest="javascript:alert(1)"></html>',
      '<command icon="javascript:alert(1)"></command>',
      '<img srcset="a.png 1x, javascript:alert(1) 2x">',
      '<svg><a xlink:href="javascript:alert(1)"><text>x</text></a></svg>',
      '<param name="movie" value="javascript:alert(1)">',
      '<meta http-equiv="refresh" content="0;url=javascript:alert(1)">',
      '<meta http-equiv="Refresh" content="0; URL=\'javascript:alert(1)\'">',
      '<svg><a><animate attributeName="href" values="https://x.test/;javascript:alert(1)"/><text>x</text></a></svg>',
      '<svg><a><set attributeName="href" to="javascript:alert(1)"/><text>x</text></a></svg>',
      '<div style="background:url(javascript:alert(1))">x</div>',
      '<div style="background:u\\72l(\'java\\73 cript:alert(1)\')">x</div>',
      '<style>div{background:url("javascript:alert(1)")}</style>',
      '<a href="vbscript:msgbox(1)">x</a>',
      '<a href="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==">x</a>',
      '<iframe src="data:image/svg+xml,<svg onload=alert(1)>"></iframe>',
      '<a href="javascript&colon;alert(1)">x</a>',
      '<a href="&#106avascript:alert(1)">x</a>',
      '<a href="jav&#x09;ascript:alert(1)">x</a>',
      '<form><button formaction="javascript:alert(1)">x</button></form>',
    ]) expect(errorsOf(h), h).to.deep.equal(['javascript_url']);
  });

  it('srcdoc, comments a browser ends at --!>, and raw text that SVG reads as markup are checked as HTML', () => {
    expect(errorsOf('<iframe srcdoc="&lt;script&gt;alert(1)&lt;/script&gt;"></iframe>')).to.deep.equal(['script_tag']);
    expect(errorsOf('<iframe srcdoc="&lt;img src=x onerror=alert(1)&gt;"></iframe>')).to.deep.equal(['event_handler']);
    expect(errorsOf('<!-- a --!><img src=x onerror=alert(1)> -->')).to.deep.equal(['event_handler']);
    expect(errorsOf('<svg><style><img src=x onerror=alert(1)></style></svg>')).to.deep.equal(['event_handler']);
    expect(errorsOf('<!--[if mso]><v:roundrect href="javascript:alert(1)"></v:roundrect><![endif]-->')).to.deep.equal(['javascript_url']);
    const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
    let nested = '<p>x</p>';
    for (let i = 0; i < 6; i++) nested = `<iframe srcdoc="${esc(nested)}"></iframe>`;
    expect(errorsOf(nested)).to.deep.equal(['html_too_deep']);
  });

  it('what mail templates use stays valid: http(s), mailto, tel, relative, raster data: images, Outlook conditional comments, CSS', () => {
    for (const h of [
      '<a href="https://x.test/a?b=1&amp;c=2">x</a><a href="mailto:a@x.test">m</a><a href="tel:+331">t</a><a href="/p">r</a><a href="#top">f</a>',
      '<img src="data:image/png;base64,iVBORw0KGgo=" srcset="a.png 1x, b.png 2x" alt="">',
      '<img src="data:image/svg+xml;base64,PHN2Zz4=" alt="">',
      '<!--[if mso]><v:roundrect href="https://x.test/" style="width:200px"><w:anchorlock/></v:roundrect><![endif]-->',
      '<style>@media (max-width:600px){.a>td{background:url(https://x.test/bg.png)}}</style><div style="background-image:url(\'https://x.test/i.png\')">x</div>',
      '<meta http-equiv="refresh" content="30"><title>a < b</title>',
      '<p title="{{name}}">Hi {{name}}</p><a href="https://x.test/?u={{name}}">x</a><a href="{{unsubscribe_url}}">u</a>',
    ]) expect(errorsOf(h), h).to.deep.equal([]);
  });
});
