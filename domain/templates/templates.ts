import { fail } from '../errors';
import { compiledHtml, inspectHtml, MAX_HTML_DEPTH, MERGE_TAG, noFacts, renderHtml, type HtmlFacts, type Neutralised } from './html';

/**
 * Communications templates (SPEC "Template", "Communications templates"; docs/TEMPLATES.md): the
 * fields a template must have, the checks that make an email template safe to send, and the merge
 * rendering of a preview. Pure: no storage, no clock.
 */

export type TemplateType = 'html' | 'text';
export interface TemplateContent { name: string; subject: string; type: TemplateType; body_html: string | null; body_text: string | null }

export interface TemplateIssue { code: string; message: string; field?: string }
export interface TemplateMetrics {
  htmlSize: number; textLength: number; subjectLength: number; nodeCount: number; linkCount: number; imageCount: number; mergeVariables: string[];
}
export interface TemplateValidation {
  valid: boolean;
  warnings: TemplateIssue[];
  errors: TemplateIssue[];
  metrics: TemplateMetrics;
  preview: { subject: string; body_html: string | null; body_text: string | null };
}

export const LIMITS = {
  name: 200,
  subject: 998,
  /** Gmail clips a message past ~102 KB of HTML: warned from here. */
  htmlWarnBytes: 100 * 1024,
  htmlMaxBytes: 512 * 1024,
  textMaxLength: 512 * 1024,
  nodesWarn: 1500,
  nodesMax: 10_000,
  linksWarn: 100,
  imagesWarn: 50,
} as const;

/** Merge variables every template may use; their preview values when sampleData has none. */
export const BUILT_IN_VARIABLES: Readonly<Record<string, string>> = {
  name: 'Alex Example',
  identity_name: 'Example Inc.',
  unsubscribe_url: 'https://example.com/unsubscribe/preview',
};

const MERGE_OPEN = /\{\{/g;

/** The template's fields from a request body (create: all; update: `partial`), or 400 validation_error. */
export function templateFields(body: unknown, partial: boolean): Partial<TemplateContent> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw fail('validation_error', 400, 'The body must be a JSON object');
  const b = body as Record<string, unknown>;
  const out: Partial<TemplateContent> = {};
  for (const field of ['name', 'subject', 'body_html', 'body_text'] as const) {
    const v = b[field];
    if (v === undefined) continue;
    if (v !== null && typeof v !== 'string') throw fail('validation_error', 400, `${field} must be a string`, { details: { field } });
    if (v === null && (field === 'name' || field === 'subject')) throw fail('validation_error', 400, `${field} cannot be null`, { details: { field } });
    (out as Record<string, unknown>)[field] = v;
  }
  if (b.type !== undefined) {
    if (b.type !== 'html' && b.type !== 'text') throw fail('validation_error', 400, 'type must be "html" or "text"', { details: { field: 'type' } });
    out.type = b.type;
  }
  if (partial && Object.keys(out).length === 0) throw fail('validation_error', 400, 'Give at least one of name, subject, type, body_html, body_text');
  return out;
}

/** sampleData: an object of merge values (strings, numbers or booleans). */
export function sampleDataOf(value: unknown): Record<string, string> {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw fail('validation_error', 400, 'sampleData must be an object of merge values', { details: { field: 'sampleData' } });
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(value)) {
    if (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean') throw fail('validation_error', 400, `sampleData.${k} must be a string, number or boolean`, { details: { field: `sampleData.${k}` } });
    out[k] = String(v);
  }
  return out;
}

/** Own values only: `{{constructor}}` or `{{__proto__}}` must not reach Object.prototype (unknown: empty). */
const valueOf = (values: Record<string, string>) => (name: string): string => (Object.hasOwn(values, name) ? values[name] : '');

/** Replaces merge tags in a subject or a text body, as they are. */
function render(text: string, values: Record<string, string>): string {
  const v = valueOf(values);
  return text.replace(MERGE_TAG, (_m, name: string) => v(name));
}

/** Replaces merge tags in an HTML body by where they sit (domain/templates/html.ts renderHtml). */
function renderBodyHtml(html: string, values: Record<string, string>): { html: string; neutralised: Neutralised[] } {
  return renderHtml(compiledHtml(html), valueOf(values));
}

/**
 * A template's subject and bodies with their merge tags replaced by `values` (unknown variables
 * render empty). In `body_html` a value is rendered by where it sits (docs/TEMPLATES.md "Merge
 * values in the HTML"): HTML-escaped, and an attribute it would make run script, or a URL attribute
 * it would give a scheme other than http, https, mailto or tel, is neutralised. The preview of a
 * validation and each campaign message are rendered by this one function.
 */
export function renderTemplate(
  content: Pick<TemplateContent, 'subject' | 'body_html' | 'body_text'>, values: Record<string, string>,
): { subject: string; body_html: string | null; body_text: string | null } {
  return renderReported(content, values).rendered;
}

function renderReported(content: Pick<TemplateContent, 'subject' | 'body_html' | 'body_text'>, values: Record<string, string>) {
  const html = content.body_html === null ? null : renderBodyHtml(content.body_html, values);
  return {
    rendered: { subject: render(content.subject, values), body_html: html?.html ?? null, body_text: content.body_text === null ? null : render(content.body_text, values) },
    neutralised: html?.neutralised ?? [],
  };
}

/** Every check of a template, with its metrics and a preview rendered with `sampleData`. */
export function validateTemplate(input: Partial<TemplateContent>, sampleData: Record<string, string> = {}): TemplateValidation {
  const errors: TemplateIssue[] = [];
  const warnings: TemplateIssue[] = [];
  const name = input.name ?? '';
  const subject = input.subject ?? '';
  const html = input.body_html ?? null;
  const text = input.body_text ?? null;

  if (name.trim() === '') errors.push({ code: 'name_required', field: 'name', message: 'name is required' });
  else if (name.length > LIMITS.name) errors.push({ code: 'name_too_long', field: 'name', message: `name is longer than ${LIMITS.name} characters` });
  if (subject.trim() === '') errors.push({ code: 'subject_required', field: 'subject', message: 'subject is required' });
  else if (subject.length > LIMITS.subject) errors.push({ code: 'subject_too_long', field: 'subject', message: `subject is longer than ${LIMITS.subject} characters` });
  if (/[\r\n]/.test(subject)) errors.push({ code: 'subject_line_break', field: 'subject', message: 'subject must be one line' });
  if (input.type !== 'html' && input.type !== 'text') errors.push({ code: 'type_required', field: 'type', message: 'type is required: html or text' });
  if (input.type === 'html' && (html === null || html.trim() === '')) errors.push({ code: 'body_html_required', field: 'body_html', message: 'type html needs body_html' });
  if (input.type === 'text' && (text === null || text.trim() === '')) errors.push({ code: 'body_text_required', field: 'body_text', message: 'type text needs body_text' });
  if (input.type === 'html' && html && (text === null || text.trim() === '')) {
    warnings.push({ code: 'body_text_missing', field: 'body_text', message: 'No plain-text part: some clients and spam filters expect one' });
  }

  const htmlSize = html === null ? 0 : Buffer.byteLength(html);
  let facts: HtmlFacts = noFacts();
  if (html !== null && input.type === 'html') {
    if (htmlSize > LIMITS.htmlMaxBytes) errors.push({ code: 'html_too_large', field: 'body_html', message: `body_html is ${htmlSize} bytes; at most ${LIMITS.htmlMaxBytes}` });
    else if (htmlSize > LIMITS.htmlWarnBytes) warnings.push({ code: 'html_large', field: 'body_html', message: `body_html is ${htmlSize} bytes: Gmail clips messages past about 102 KB` });
    if (htmlSize <= LIMITS.htmlMaxBytes) facts = inspectHtml(html);
    if (facts.nodes > LIMITS.nodesMax) errors.push({ code: 'too_many_nodes', field: 'body_html', message: `${facts.nodes} HTML elements; at most ${LIMITS.nodesMax}` });
    else if (facts.nodes > LIMITS.nodesWarn) warnings.push({ code: 'many_nodes', field: 'body_html', message: `${facts.nodes} HTML elements: heavy to render in mail clients` });
    if (facts.links > LIMITS.linksWarn) warnings.push({ code: 'many_links', field: 'body_html', message: `${facts.links} links: spam filters count them` });
    if (facts.images > LIMITS.imagesWarn) warnings.push({ code: 'many_images', field: 'body_html', message: `${facts.images} images: spam filters weigh image-heavy mail` });
    errors.push(...safetyErrors(facts));
    if (htmlSize <= LIMITS.htmlMaxBytes) {
      const misplaced = compiledHtml(html).slots.filter((s) => s.context === 'tag' || s.context === 'unquoted' || s.context === 'srcdoc');
      if (misplaced.length > 0) {
        errors.push({
          code: 'merge_tag_in_tag', field: 'body_html',
          message: `merge tags must be in text or in a quoted attribute value, not inside a tag, an unquoted value or srcdoc, where a value could add markup: ${[...new Set(misplaced.map((s) => `{{${s.name}}}`))].slice(0, 5).join(', ')}`,
        });
      }
    }
  }
  if (text !== null && text.length > LIMITS.textMaxLength) errors.push({ code: 'text_too_long', field: 'body_text', message: `body_text is longer than ${LIMITS.textMaxLength} characters` });

  const parts = [subject, html ?? '', text ?? ''];
  const variables = [...new Set(parts.flatMap((p) => [...p.matchAll(MERGE_TAG)].map((m) => m[1])))].sort();
  for (const [field, p] of [['subject', subject], ['body_html', html ?? ''], ['body_text', text ?? '']] as const) {
    const opened = (p.match(MERGE_OPEN) ?? []).length;
    const complete = [...p.matchAll(MERGE_TAG)].length;
    if (opened > complete) errors.push({ code: 'malformed_merge_tag', field, message: `${field} has a "{{" that is not a {{variable}}` });
  }
  if (!variables.includes('unsubscribe_url')) {
    warnings.push({ code: 'unsubscribe_missing', message: 'No {{unsubscribe_url}}: bulk mail without an unsubscribe link is refused by major mailbox providers' });
  }
  const values = { ...BUILT_IN_VARIABLES, ...sampleData };
  const unknown = variables.filter((v) => values[v] === undefined);
  if (unknown.length > 0) warnings.push({ code: 'merge_value_missing', message: `No value for ${unknown.join(', ')} in sampleData: rendered empty in the preview` });

  const { rendered: preview, neutralised } = renderReported({ subject, body_html: html, body_text: text }, values);
  if (input.type === 'html' && preview.body_html !== null && htmlSize <= LIMITS.htmlMaxBytes) {
    // The values are in now: anything the rendering let through that the template itself did not have is an error too.
    const after = inspectHtml(preview.body_html);
    const before = new Set(errors.map((e) => e.code));
    errors.push(...safetyErrors({
      scripts: after.scripts - facts.scripts, scriptUrls: after.scriptUrls - facts.scriptUrls, tooDeep: after.tooDeep - facts.tooDeep,
      handlers: after.handlers.filter((h) => !facts.handlers.includes(h)),
    }, ' (in the preview rendered with sampleData)').filter((e) => !before.has(e.code)));
    for (const n of neutralised) {
      warnings.push({
        code: 'merge_value_unsafe', field: 'body_html',
        message: `sampleData for ${n.variables.map((v) => `{{${v}}}`).join(', ')} would make <${n.tag} ${n.attribute}> run script or point to a scheme other than http, https, mailto or tel: rendered as ${n.replacement === '' ? 'an empty value' : n.replacement}`,
      });
    }
  }

  return {
    valid: errors.length === 0,
    warnings,
    errors,
    metrics: {
      htmlSize, textLength: text?.length ?? 0, subjectLength: subject.length, nodeCount: facts.nodes, linkCount: facts.links, imageCount: facts.images,
      mergeVariables: variables,
    },
    preview,
  };
}

/** The errors of what can run script in an HTML body. */
function safetyErrors(f: Pick<HtmlFacts, 'scripts' | 'scriptUrls' | 'handlers' | 'tooDeep'>, where = ''): TemplateIssue[] {
  const out: TemplateIssue[] = [];
  if (f.scripts > 0) out.push({ code: 'script_tag', field: 'body_html', message: `script tags are not allowed (mail clients strip them)${where}` });
  if (f.scriptUrls > 0) out.push({ code: 'javascript_url', field: 'body_html', message: `script URLs are not allowed: javascript:, vbscript:, and data: other than images${where}` });
  if (f.handlers.length > 0) out.push({ code: 'event_handler', field: 'body_html', message: `event handler attributes are not allowed: ${f.handlers.slice(0, 5).join(', ')}${where}` });
  if (f.tooDeep > 0) out.push({ code: 'html_too_deep', field: 'body_html', message: `markup nested more than ${MAX_HTML_DEPTH} levels deep in srcdoc, comments or raw-text elements cannot be checked${where}` });
  return out;
}
