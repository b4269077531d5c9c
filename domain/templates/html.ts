import { QuoteType, Tokenizer } from 'htmlparser2';

/**
 * The HTML side of communications templates (docs/TEMPLATES.md "Checks"): what in a template's
 * HTML can run script. Pure: no I/O.
 *
 * The HTML is read with htmlparser2's tokenizer (walkHtml). Where htmlparser2 and browsers can disagree,
 * the content is read both ways: comments (a browser also ends one at `--!>`), CDATA, and the text
 * of htmlparser2's raw-text elements (inside SVG or MathML a `<style>` or `<title>` is not raw text)
 * are read again as HTML.
 */

/** Attributes whose value is one URL a client loads or follows; `xlink:href` and any `*:href` too. */
const URL_ATTRIBUTES = new Set([
  'href', 'src', 'action', 'formaction', 'background', 'data', 'poster', 'cite', 'longdesc', 'codebase', 'classid',
  'lowsrc', 'dynsrc', 'usemap', 'manifest', 'icon', 'profile', 'xml:base',
]);
/** Attributes holding several URLs: srcset candidates (URL and descriptor), ping's and archive's lists. */
const URL_LIST_ATTRIBUTES = new Set(['srcset', 'imagesrcset', 'ping', 'archive']);
/** Attributes that only ever load an image or media: a data: URL there cannot run script. */
const IMAGE_ATTRIBUTES = new Set(['poster', 'background', 'lowsrc', 'dynsrc', 'icon', 'srcset', 'imagesrcset']);
const MEDIA_ELEMENTS = new Set(['img', 'image', 'input', 'video', 'audio', 'source', 'track', 'picture']);
/** SVG animation elements: `values`, `to`, `from` and `by` can set an `href` to a javascript: URL. */
const SVG_ANIMATIONS = new Set(['animate', 'set', 'animatemotion', 'animatetransform', 'animatecolor']);
const SVG_ANIMATION_VALUES = new Set(['values', 'to', 'from', 'by']);
/** The elements htmlparser2's tokenizer reads as raw text (up to their end tag). */
const RAW_TEXT = new Set(['script', 'style', 'title', 'textarea', 'xmp']);
/** How deep srcdoc documents, comments and raw text are read again as HTML; deeper is an error. */
export const MAX_HTML_DEPTH = 4;

export const isUrlAttribute = (name: string): boolean => URL_ATTRIBUTES.has(name) || name.endsWith(':href');

/**
 * The scheme a client reads in a URL (entities already decoded), lower case; null for a relative
 * URL (no `:` before the first `/`, `?` or `#`). Whitespace and control characters are ignored
 * anywhere: browsers strip tabs and newlines inside a URL ("java\tscript:" runs), older engines more.
 */
export function urlScheme(url: string): string | null {
  const m = /^([^:/?#]*):/.exec(url.replace(/[\u0000-\u0020\u007f]/g, ''));
  return m ? m[1].toLowerCase() : null;
}

const RASTER_IMAGE = /^image\/(png|gif|jpe?g|pjpeg|webp|avif|apng|bmp|x-icon|vnd\.microsoft\.icon)$/;

/**
 * A URL that runs script when followed, loaded or embedded: javascript:, vbscript:, or a data: URL
 * other than a raster image (data:text/html, data:image/svg+xml, ...). `imageOnly`: the attribute
 * only loads an image or media, where no data: URL can run script.
 */
export function isScriptUrl(url: string, imageOnly = false): boolean {
  const scheme = urlScheme(url);
  if (scheme === 'javascript' || scheme === 'vbscript') return true;
  if (scheme !== 'data' || imageOnly) return false;
  const s = url.replace(/[\u0000-\u0020\u007f]/g, '');
  return !RASTER_IMAGE.test(s.slice(s.indexOf(':') + 1).split(/[;,]/)[0].toLowerCase());
}

/** The URL of a `<meta http-equiv="refresh" content="...">`, read as browsers do (`;` and `url=` optional, quotes stripped). */
function refreshUrl(content: string): string {
  const m = /^[\t\n\f\r ]*[\d.]*[\t\n\f\r ]*[;,]?[\t\n\f\r ]*(?:url[\t\n\f\r ]*=[\t\n\f\r ]*)?(['"]?)(.*)$/is.exec(content);
  if (!m) return '';
  const url = m[2];
  return m[1] !== '' && url.includes(m[1]) ? url.slice(0, url.indexOf(m[1])) : url;
}

/** The URLs in CSS (a style attribute or element): url(...) and @import, CSS escapes and comments removed first. */
function cssUrls(css: string): string[] {
  const s = css
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/\\([0-9a-f]{1,6})[\t\n\f\r ]?/gi, (_m, hex: string) => String.fromCodePoint(Math.min(parseInt(hex, 16), 0x10ffff)))
    .replace(/\\([\s\S])/g, '$1');
  return [...s.matchAll(/url[\t\n\f\r ]*\([\t\n\f\r ]*(['"]?)([^'")]*)/gi), ...s.matchAll(/@import[\t\n\f\r ]*(['"])([^'"]*)/gi)].map((m) => m[2]);
}

export interface HtmlSafety {
  /** `<script>` elements. */
  scripts: number;
  /** Distinct `on*` attribute names. */
  handlers: string[];
  /** URLs that run script (isScriptUrl), in any URL-bearing place. */
  scriptUrls: number;
  /** Content nested deeper than MAX_HTML_DEPTH that could hold markup (not checked, so refused). */
  tooDeep: number;
}
export interface HtmlFacts extends HtmlSafety { nodes: number; links: number; images: number }

export const noFacts = (): HtmlFacts => ({ nodes: 0, links: 0, images: 0, scripts: 0, handlers: [], scriptUrls: 0, tooDeep: 0 });
export const isUnsafe = (f: HtmlSafety): boolean => f.scripts + f.handlers.length + f.scriptUrls + f.tooDeep > 0;

function addSafety(to: HtmlSafety, from: HtmlSafety): void {
  to.scripts += from.scripts;
  to.scriptUrls += from.scriptUrls;
  to.tooDeep += from.tooDeep;
  for (const h of from.handlers) if (!to.handlers.includes(h)) to.handlers.push(h);
}

/**
 * Adds to `facts` what the attributes of one start tag can run, and returns the names of the
 * attributes that can (`attrs`: decoded values, names in lower case, the first of a repeated name
 * as browsers keep it).
 */
export function inspectTag(tag: string, attrs: Record<string, string>, facts: HtmlSafety, depth = 0): string[] {
  const unsafe: string[] = [];
  for (const [attr, value] of Object.entries(attrs)) {
    if (/^on/.test(attr)) {
      if (!facts.handlers.includes(attr)) facts.handlers.push(attr);
      unsafe.push(attr);
      continue;
    }
    if (attr === 'srcdoc') {
      // A whole HTML document: read it as one.
      if (depth >= MAX_HTML_DEPTH) facts.tooDeep++;
      else {
        const inner = inspectHtml(value, depth + 1);
        if (!isUnsafe(inner)) continue;
        addSafety(facts, inner);
      }
      unsafe.push(attr);
      continue;
    }
    let urls: string[] = [];
    let imageOnly = IMAGE_ATTRIBUTES.has(attr);
    if (isUrlAttribute(attr)) {
      urls = [value];
      imageOnly ||= attr === 'src' && MEDIA_ELEMENTS.has(tag);
    } else if (URL_LIST_ATTRIBUTES.has(attr)) urls = value.split(/[\t\n\f\r ,]+/);
    else if (attr === 'style') { urls = cssUrls(value); imageOnly = true; }
    else if (SVG_ANIMATIONS.has(tag) && SVG_ANIMATION_VALUES.has(attr)) urls = value.split(';');
    else if (tag === 'meta' && attr === 'content' && (attrs['http-equiv'] ?? '').trim().toLowerCase() === 'refresh') urls = [refreshUrl(value)];
    else if (tag === 'param' && attr === 'value') urls = [value];
    const n = urls.filter((u) => isScriptUrl(u, imageOnly)).length;
    if (n > 0) {
      facts.scriptUrls += n;
      unsafe.push(attr);
    }
  }
  return unsafe;
}

interface Attr { name: string; value: string; quote: QuoteType; valueStart: number; valueEnd: number }
interface Walker {
  tag(name: string, attrs: Attr[]): void;
  text(start: number, end: number): void;
  /** Content to read again as HTML: a comment's or CDATA's, or a raw-text element's (`element`). */
  nested(start: number, end: number, element: string | null): void;
}

const isSpace = (c: string | undefined): boolean => c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '\f';

/** Walks `html[from, to)` with htmlparser2's tokenizer; every position given to `w` is in `html`. */
function walkHtml(html: string, from: number, to: number, w: Walker): void {
  const src = from === 0 && to === html.length ? html : html.slice(from, to);
  let tag = '';
  let attrs: Attr[] = [];
  let attr = '';
  let nameEnd = 0;
  let value = '';
  let raw: { name: string; start: number } | null = null;
  const valueStart = (quoted: boolean): number => {
    let i = nameEnd;
    while (isSpace(src[i])) i++;
    i++; // '='
    while (isSpace(src[i])) i++;
    return quoted ? i + 1 : i;
  };
  const tokenizer = new Tokenizer({ xmlMode: false, decodeEntities: true }, {
    onopentagname(start, end) { tag = src.slice(start, end).toLowerCase(); attrs = []; },
    onattribname(start, end) { attr = src.slice(start, end).toLowerCase(); nameEnd = end; value = ''; },
    onattribdata(start, end) { value += src.slice(start, end); },
    onattribentity(cp) { value += String.fromCodePoint(cp); },
    onattribend(quote, end) {
      // `end` is after the closing quote of a quoted value.
      const quoted = quote === QuoteType.Double || quote === QuoteType.Single;
      const start = quote === QuoteType.NoValue ? end : valueStart(quoted);
      attrs.push({ name: attr, value, quote, valueStart: from + start, valueEnd: from + (quoted ? end - 1 : end) });
    },
    onopentagend(end) {
      w.tag(tag, attrs);
      if (RAW_TEXT.has(tag)) raw = { name: tag, start: end + 1 };
    },
    onselfclosingtag() { w.tag(tag, attrs); },
    onclosetag(start, end) {
      if (raw !== null && src.slice(start, end).toLowerCase() === raw.name) {
        w.nested(from + raw.start, from + start - 2, raw.name);
        raw = null;
      }
    },
    ontext(start, end) { if (raw === null) w.text(from + start, from + end); },
    oncomment(start, end, offset) { w.nested(from + start, from + Math.max(start, end - offset), null); },
    oncdata(start, end, offset) { w.nested(from + start, from + Math.max(start, end - offset), null); },
    onend() {
      if (raw !== null) w.nested(from + raw.start, to, raw.name);
      raw = null;
    },
    ondeclaration() {}, onprocessinginstruction() {}, ontextentity() {},
  });
  tokenizer.write(src);
  tokenizer.end();
}

/** The first value of each attribute name, as browsers keep it. */
function firstValues(attrs: Array<{ name: string; value: string }>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const a of attrs) if (!Object.hasOwn(out, a.name)) out[a.name] = a.value;
  return out;
}

/**
 * What an HTML body holds: element, link and image counts (of the body itself), and everything
 * that can run script, wherever it is (srcdoc documents, comments, raw text read again as HTML).
 */
export function inspectHtml(html: string, depth = 0): HtmlFacts {
  const facts = noFacts();
  const visit = (from: number, to: number, level: number) => walkHtml(html, from, to, {
    tag(name, attrs) {
      const values = firstValues(attrs);
      if (level === depth) {
        facts.nodes++;
        if (name === 'a' && values.href !== undefined) facts.links++;
        if (name === 'img') facts.images++;
      }
      if (name === 'script') facts.scripts++;
      inspectTag(name, values, facts, level);
    },
    text() {},
    nested(start, end, element) {
      if (element === 'script') return;
      const content = html.slice(start, end);
      if (element === 'style') facts.scriptUrls += cssUrls(content).filter((u) => isScriptUrl(u, true)).length;
      if (!content.includes('<')) return;
      if (level >= MAX_HTML_DEPTH) facts.tooDeep++;
      else visit(start, end, level + 1);
    },
  });
  visit(0, html.length, depth);
  return facts;
}
