import { Parser, QuoteType, Tokenizer } from 'htmlparser2';

/**
 * The HTML side of communications templates (docs/TEMPLATES.md "Checks" and "Merge values in the
 * HTML"): what in a template's HTML can run script, where each merge tag sits, and the rendering
 * of merge values by where they sit. Pure: no I/O.
 *
 * The checks and the rendering read the HTML with the same walk (htmlparser2's tokenizer), so they
 * agree on what is a tag, an attribute value or text. Where htmlparser2 and browsers can disagree,
 * the content is read both ways: comments (a browser also ends one at `--!>`), CDATA, and the text
 * of htmlparser2's raw-text elements (inside SVG or MathML a `<style>` or `<title>` is not raw text)
 * are read again as HTML.
 */

export const MERGE_TAG = /\{\{\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*\}\}/g;

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

/** Schemes a merge value may give a URL attribute (or none: a relative URL). */
const MERGE_URL_SCHEMES = new Set(['http', 'https', 'mailto', 'tel']);
/** What a URL attribute holds when a merge value would have given it another scheme. */
export const NEUTRALISED_URL = 'about:invalid';

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

/**
 * Where a merge tag sits in the HTML:
 * - `text`: in text (also comments and raw text): its value is escaped there;
 * - `attribute`: in a quoted attribute value: escaped, and checked by the attribute (renderHtml);
 * - `unquoted`: in an unquoted attribute value: a value with a space would add attributes;
 * - `tag`: inside a tag outside any value (attribute or tag name, between attributes), right after
 *   `<` or `</` in text, in a declaration or deeper than MAX_HTML_DEPTH: a value would add markup;
 * - `srcdoc`: in an srcdoc value, itself HTML.
 * The last three are errors of the checks (merge_tag_in_tag).
 */
export type MergeContext = 'text' | 'attribute' | 'unquoted' | 'tag' | 'srcdoc';

export interface MergeSlot { start: number; end: number; name: string; context: MergeContext; attribute: string | null }

interface TagSlots {
  name: string;
  attrs: Array<Attr & { slots: MergeSlot[] }>;
  /** What the tag's own (template) attributes can run, and their URL schemes: a value must not add to either. */
  unsafe: Set<string>;
  schemes: Map<string, Set<string | null>>;
}

/** A template's HTML read once: its merge tags with their places, and the tags with one in an attribute value. */
export interface CompiledHtml { html: string; slots: MergeSlot[]; tags: TagSlots[] }

/** The schemes of a URL attribute's URLs (one, or each item of a list). */
function urlSchemes(attr: string, value: string): Set<string | null> | null {
  if (isUrlAttribute(attr)) return new Set([urlScheme(value)]);
  if (URL_LIST_ATTRIBUTES.has(attr)) return new Set(value.split(/[\t\n\f\r ,]+/).filter((u) => u !== '').map(urlScheme));
  return null;
}

export function compileHtml(html: string): CompiledHtml {
  const found = [...html.matchAll(MERGE_TAG)];
  if (found.length === 0) return { html, slots: [], tags: [] };
  type Region = { start: number; end: number; attr: (Attr & { slots: MergeSlot[] }) | null };
  const regions: Region[] = [];
  const tags: Array<TagSlots['attrs']> = [];
  const tagNames: string[] = [];
  const visit = (from: number, to: number, depth: number) => walkHtml(html, from, to, {
    tag(name, attrs) {
      const withSlots = attrs.map((a) => ({ ...a, slots: [] as MergeSlot[] }));
      tags.push(withSlots);
      tagNames.push(name);
      for (const a of withSlots) if (a.quote !== QuoteType.NoValue) regions.push({ start: a.valueStart, end: a.valueEnd, attr: a });
    },
    text(start, end) { regions.push({ start, end, attr: null }); },
    nested(start, end, element) {
      if (element === 'script') regions.push({ start, end, attr: null });
      else if (depth < MAX_HTML_DEPTH) visit(start, end, depth + 1);
    },
  });
  visit(0, html.length, 0);
  regions.sort((a, b) => a.start - b.start);

  const slots: MergeSlot[] = [];
  let r = 0;
  for (const m of found) {
    const start = m.index;
    const end = start + m[0].length;
    while (r < regions.length && regions[r].end <= start) r++;
    const region = r < regions.length && regions[r].start <= start && end <= regions[r].end ? regions[r] : null;
    let context: MergeContext = 'tag';
    if (region?.attr) {
      context = region.attr.name === 'srcdoc' ? 'srcdoc' : region.attr.quote === QuoteType.Unquoted ? 'unquoted' : 'attribute';
    } else if (region) {
      // Right after "<" or "</" (merge tags of tag position in between render as a space), a value would open a tag.
      let p = start;
      for (let i = slots.length - 1; i >= 0 && slots[i].end === p && slots[i].context === 'tag'; i--) p = slots[i].start;
      context = html[p - 1] === '<' || html.slice(p - 2, p) === '</' ? 'tag' : 'text';
    }
    const slot: MergeSlot = { start, end, name: m[1], context, attribute: region?.attr?.name ?? null };
    slots.push(slot);
    if (region?.attr && context !== 'srcdoc') region.attr.slots.push(slot);
  }

  const withSlots: TagSlots[] = [];
  tags.forEach((attrs, i) => {
    if (!attrs.some((a) => a.slots.length > 0)) return;
    const schemes = new Map<string, Set<string | null>>();
    for (const a of attrs) {
      const s = urlSchemes(a.name, a.value);
      if (s !== null && !schemes.has(a.name)) schemes.set(a.name, s);
    }
    withSlots.push({ name: tagNames[i], attrs, unsafe: new Set(inspectTag(tagNames[i], firstValues(attrs), noFacts())), schemes });
  });
  return { html, slots, tags: withSlots };
}

const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** An attribute value as a browser reads it: `raw` as written between `quote`s (which it does not contain). */
function decodeAttribute(raw: string, quote: '"' | "'"): string {
  let value = '';
  new Parser({ onattribute(_name, v) { value = v; } }, { decodeEntities: true }).end(`<a v=${quote}${raw}${quote}>`);
  return value;
}

/** An attribute a merge value would have made run script or point elsewhere than http(s), mailto or tel. */
export interface Neutralised { tag: string; attribute: string; variables: string[]; replacement: string }

/**
 * The HTML with each merge tag replaced by its value, by where it sits: escaped (& < > " ') in text
 * and attribute values, a space where it would add markup (`tag`, `srcdoc`: refused by the checks,
 * so only in a template stored before them). An unquoted attribute value with a merge tag is
 * written double-quoted, so its value stays one value. Then, for each tag with a merge tag in an
 * attribute value, its attributes are read as a browser would with the values in: an attribute the
 * values made able to run script (inspectTag), or a URL attribute (URL_ATTRIBUTES,
 * URL_LIST_ATTRIBUTES) whose scheme a value changed to one other than http, https, mailto or tel,
 * is replaced: a URL attribute by NEUTRALISED_URL, any other by an empty value.
 */
export function renderHtml(c: CompiledHtml, valueOf: (name: string) => string): { html: string; neutralised: Neutralised[] } {
  if (c.slots.length === 0) return { html: c.html, neutralised: [] };
  const edits: Array<{ start: number; end: number; text: string }> = [];
  for (const s of c.slots) {
    if (s.context === 'text') edits.push({ start: s.start, end: s.end, text: escapeHtml(valueOf(s.name)) });
    else if (s.context === 'tag' || s.context === 'srcdoc') edits.push({ start: s.start, end: s.end, text: ' ' });
  }
  const neutralised: Neutralised[] = [];
  for (const t of c.tags) {
    const rendered = t.attrs.map((a) => {
      if (a.slots.length === 0) return { raw: null, value: a.value };
      let raw = '';
      let at = a.valueStart;
      for (const s of a.slots) {
        raw += c.html.slice(at, s.start) + escapeHtml(valueOf(s.name));
        at = s.end;
      }
      raw += c.html.slice(at, a.valueEnd);
      // An unquoted value is written double-quoted: a `"` of the template's own text must then be a reference.
      if (a.quote === QuoteType.Unquoted) raw = raw.replace(/"/g, '&quot;');
      return { raw, value: decodeAttribute(raw, a.quote === QuoteType.Single ? "'" : '"') };
    });
    const values = firstValues(t.attrs.map((a, i) => ({ name: a.name, value: rendered[i].value })));
    const unsafe = new Set(inspectTag(t.name, values, noFacts()).filter((name) => !t.unsafe.has(name)));
    for (const [name, before] of t.schemes) {
      const after = urlSchemes(name, values[name])!;
      if ([...after].some((s) => s !== null && !MERGE_URL_SCHEMES.has(s) && !before.has(s))) unsafe.add(name);
    }
    t.attrs.forEach((a, i) => {
      const q = a.quote === QuoteType.Single ? "'" : '"';
      if (unsafe.has(a.name)) {
        const replacement = isUrlAttribute(a.name) || URL_LIST_ATTRIBUTES.has(a.name) ? NEUTRALISED_URL : '';
        neutralised.push({ tag: t.name, attribute: a.name, variables: [...new Set(t.attrs.flatMap((x) => x.slots.map((s) => s.name)))], replacement });
        edits.push(a.quote === QuoteType.NoValue
          ? { start: a.valueEnd, end: a.valueEnd, text: `=""` }
          : a.quote === QuoteType.Unquoted ? { start: a.valueStart, end: a.valueEnd, text: `"${replacement}"` } : { start: a.valueStart, end: a.valueEnd, text: replacement });
      } else if (rendered[i].raw !== null) {
        edits.push({ start: a.valueStart, end: a.valueEnd, text: a.quote === QuoteType.Unquoted ? `${q}${rendered[i].raw}${q}` : rendered[i].raw! });
      }
    });
  }
  edits.sort((x, y) => x.start - y.start);
  let out = '';
  let at = 0;
  for (const e of edits) {
    out += c.html.slice(at, e.start) + e.text;
    at = e.end;
  }
  return { html: out + c.html.slice(at), neutralised };
}

const compiled = new Map<string, CompiledHtml>();
const COMPILED_MAX = 32;

/** compileHtml, remembered for the last few bodies: a campaign renders one body for every contact. */
export function compiledHtml(html: string): CompiledHtml {
  let c = compiled.get(html);
  if (c === undefined) {
    c = compileHtml(html);
    if (compiled.size >= COMPILED_MAX) compiled.delete(compiled.keys().next().value!);
    compiled.set(html, c);
  }
  return c;
}
