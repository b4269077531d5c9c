import { expect } from 'chai';
import { compileHtml } from '../../domain/templates/html';
import { renderTemplate, validateTemplate } from '../../domain/templates/templates';

/**
 * The HTML checks of a template and the rendering of merge values by where they sit
 * (docs/TEMPLATES.md "Checks", "Merge values in the HTML"). Each case passed the checks, or
 * rendered as given, before those rules.
 */
const errorsOf = (html: string, sampleData: Record<string, string> = {}) =>
  validateTemplate({ name: 'n', subject: 's', type: 'html', body_html: `${html} <a href="{{unsubscribe_url}}">u</a>`, body_text: 't' }, sampleData).errors.map((e) => e.code);
const html = (body_html: string, values: Record<string, string>) => renderTemplate({ subject: 's', body_html, body_text: null }, values).body_html;

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

describe('template HTML: where merge tags sit (unit)', () => {
  it('compileHtml gives each merge tag its place and attribute', () => {
    const c = compileHtml('<p class="{{a}}" id=\'{{b}}\' x={{c}} {{d}}>{{e}}<{{f}}</p><!-- <a href="{{g}}"> --><style>{{h}}</style><iframe srcdoc="{{i}}"></iframe><a{{j}}>');
    expect(c.slots.map((s) => [s.name, s.context, s.attribute])).to.deep.equal([
      ['a', 'attribute', 'class'], ['b', 'attribute', 'id'], ['c', 'unquoted', 'x'], ['d', 'tag', null], ['e', 'text', null], ['f', 'tag', null],
      ['g', 'attribute', 'href'], ['h', 'text', null], ['i', 'srcdoc', 'srcdoc'], ['j', 'tag', null],
    ]);
  });

  it('inside a tag outside a quoted value, in an unquoted value, after "<", or in srcdoc: merge_tag_in_tag', () => {
    for (const h of [
      '<img src="x" {{x}}>',
      '<a href={{u}}>x</a>',
      '<a href=https://x.test/{{u}}>x</a>',
      '<a href="x"{{y}}>x</a>',
      '<a o{{x}}nclick="f()">x</a>',
      '<{{t}}>',
      '<p>a</{{t}}</p>',
      '<{{a}}{{b}}>',
      '<scr{{x}}ipt>',
      '<iframe srcdoc="&lt;p&gt;{{x}}&lt;/p&gt;"></iframe>',
      '<style></{{x}}</style>',
    ]) expect(errorsOf(h), h).to.deep.equal(['merge_tag_in_tag']);
  });

  it('text, quoted attribute values (either quote), comments and raw text are fine', () => {
    for (const h of [
      '<p>{{name}}</p>', '<p title="{{name}}" class=\'c {{name}}\'>x</p>', '<!-- {{name}} -->', '<style>a{color:{{name}}}</style>',
      '<title>{{name}}</title>', '<p>a < {{name}}</p>', '<a href="{{name}}">x</a>',
    ]) expect(errorsOf(h), h).to.deep.equal([]);
  });
});

describe('template HTML: rendering merge values (unit)', () => {
  it('a value giving a URL attribute a scheme other than http, https, mailto, tel is rendered as about:invalid', () => {
    expect(html('<a href="{{u}}">x</a>', { u: 'javascript:alert(1)' })).to.equal('<a href="about:invalid">x</a>');
    for (const u of [' JavaScript:alert(1)', 'java\tscript:alert(1)', '\u0001javascript:alert(1)', 'vbscript:x', 'data:text/html,x', 'sms:1', 'x:y']) {
      expect(html('<a href="{{u}}">x</a>', { u }), JSON.stringify(u)).to.equal('<a href="about:invalid">x</a>');
    }
    // Escaped values cannot make an entity, but the template's own "&" can: the value is judged decoded.
    expect(html('<a href="&{{u}}">x</a>', { u: '#106;avascript:alert(1)' })).to.equal('<a href="about:invalid">x</a>');
    expect(html('<a href="java{{u}}">x</a>', { u: 'script:alert(1)' })).to.equal('<a href="about:invalid">x</a>');
    expect(html('<a href=\'{{u}}\'>x</a>', { u: 'javascript:alert(1)' })).to.equal('<a href=\'about:invalid\'>x</a>');
    expect(html('<img src="{{u}}" alt="{{u}}">', { u: 'javascript:alert(1)' })).to.equal('<img src="about:invalid" alt="javascript:alert(1)">');
    expect(html('<object data="{{u}}"></object><video poster="{{u}}"></video>', { u: 'javascript:x' })).to.equal('<object data="about:invalid"></object><video poster="about:invalid"></video>');
    expect(html('<img srcset="a.png 1x, {{u}} 2x">', { u: 'javascript:x' })).to.equal('<img srcset="about:invalid">');
    expect(html('<svg><a xlink:href="{{u}}">x</a></svg>', { u: 'javascript:x' })).to.equal('<svg><a xlink:href="about:invalid">x</a></svg>');
    expect(html('<!--[if mso]><v:roundrect href="{{u}}"></v:roundrect><![endif]-->', { u: 'javascript:x' })).to.equal('<!--[if mso]><v:roundrect href="about:invalid"></v:roundrect><![endif]-->');
  });

  it('allowed and relative values, and values after the template\'s own scheme, are kept (escaped as before)', () => {
    for (const u of ['https://x.test/a?b=1', 'HTTP://x.test/', 'mailto:a@x.test', 'tel:+331', '/path', '//x.test/p', '#top', 'page.html']) {
      expect(html('<a href="{{u}}">x</a>', { u }), u).to.equal(`<a href="${u}">x</a>`);
    }
    expect(html('<a href="{{u}}">x</a>', { u: 'https://x.test/?a=1&b="2"' })).to.equal('<a href="https://x.test/?a=1&amp;b=&quot;2&quot;">x</a>');
    expect(html('<a href="https://x.test/?r={{u}}">x</a>', { u: 'javascript:alert(1)' })).to.equal('<a href="https://x.test/?r=javascript:alert(1)">x</a>');
    expect(html('<a href="sms:{{u}}">x</a>', { u: '+331' })).to.equal('<a href="sms:+331">x</a>');
  });

  it('a value that would make an attribute run script empties it: style url(), meta refresh through http-equiv', () => {
    expect(html('<div style="background:url({{u}})">x</div>', { u: 'javascript:alert(1)' })).to.equal('<div style="">x</div>');
    expect(html('<div style="color:{{c}}">x</div>', { c: 'red' })).to.equal('<div style="color:red">x</div>');
    expect(html('<meta http-equiv="{{h}}" content="0;url=javascript:alert(1)">', { h: 'refresh' })).to.equal('<meta http-equiv="refresh" content="">');
  });

  it('a merge tag inside a tag renders as a space; an unquoted value is written quoted, so it stays one value', () => {
    expect(html('<img src="x" {{x}}>', { x: 'onerror=alert(1)' })).to.equal('<img src="x"  >');
    expect(html('<{{t}}>', { t: 'img src=x onerror=alert(1)' })).to.equal('< >');
    expect(html('<a o{{x}}nclick="f()">', { x: '' })).to.equal('<a o nclick="f()">');
    expect(html('<a href={{u}}>x</a>', { u: 'x onclick=alert(1)' })).to.equal('<a href="x onclick=alert(1)">x</a>');
    expect(html('<a href={{u}} title=a"b>x</a>', { u: 'https://x.test/' })).to.equal('<a href="https://x.test/" title=a"b>x</a>');
    expect(html('<a href=x{{u}}"y>x</a>', { u: '' })).to.equal('<a href="x&quot;y">x</a>');
    expect(html('<a href={{u}}>x</a>', { u: 'javascript:alert(1)' })).to.equal('<a href="about:invalid">x</a>');
  });

  it('text is escaped as before; the same body renders the same for every value set', () => {
    const body = '<p>{{a}}</p><a href="{{u}}">x</a>';
    expect(html(body, { a: '<b>&', u: 'javascript:x' })).to.equal('<p>&lt;b&gt;&amp;</p><a href="about:invalid">x</a>');
    expect(html(body, { a: 'ok', u: 'https://x.test/' })).to.equal('<p>ok</p><a href="https://x.test/">x</a>');
  });
});

describe('template validation: the preview with sampleData (unit)', () => {
  it('a sampleData value the rendering neutralised is a merge_value_unsafe warning; the preview has no script', () => {
    const v = validateTemplate({ name: 'n', subject: 's', type: 'html', body_html: '<a href="{{u}}">x</a> {{unsubscribe_url}}', body_text: 't' }, { u: 'javascript:alert(1)' });
    expect(v.valid).to.equal(true);
    expect(v.warnings.map((w) => w.code)).to.deep.equal(['merge_value_unsafe']);
    expect(v.preview.body_html).to.equal('<a href="about:invalid">x</a> https://example.com/unsubscribe/preview');
  });

  it('a sampleData value that puts a script URL in a <style> element is an error of the preview', () => {
    expect(errorsOf('<style>div{background:url({{u}})}</style>', { u: 'javascript:alert(1)' })).to.deep.equal(['javascript_url']);
    expect(errorsOf('<style>div{background:url({{u}})}</style>', { u: 'https://x.test/i.png' })).to.deep.equal([]);
  });
});
