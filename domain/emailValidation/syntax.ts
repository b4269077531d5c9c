import { isIPv4, isIPv6 } from 'node:net';
import { domainToASCII } from 'node:url';

/**
 * Mailbox syntax as an SMTP envelope takes it (RFC 5321 §4.1.2 Mailbox, with RFC 6531's UTF-8
 * extension for internationalised addresses): a dot-string or quoted-string local part, then a
 * domain of LDH labels (U-labels allowed, checked through their A-label form) or an IPv4 / IPv6
 * address literal. RFC 5322-only forms (comments, folding white space, obsolete syntax, general
 * domain literals) are not mailboxes an MTA can send to, so they are invalid here. Lengths:
 * local part 64 octets, domain 255, labels 63, the whole address 254 (RFC 5321 §4.5.3.1, with the
 * path's angle brackets taken off). Pure: no I/O.
 */

export type SyntaxReason =
  | 'empty' | 'control_characters' | 'no_at_sign' | 'no_local_part' | 'no_domain' | 'invalid_local_part'
  | 'unclosed_quoted_string' | 'local_part_too_long' | 'address_too_long' | 'invalid_domain' | 'label_too_long'
  | 'domain_too_long' | 'invalid_address_literal';

export type SyntaxResult =
  | { ok: true; local: string; domain: string; asciiDomain: string; quoted: boolean; literal: 'ipv4' | 'ipv6' | null; normalized: string }
  | { ok: false; reason: SyntaxReason };

const ATEXT = /^[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~\u00a0-\u{10FFFF}]$/u;
const LDH_LABEL = /^[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?$/;
const octets = (s: string) => Buffer.byteLength(s, 'utf8');

function parseLocal(input: string): { local: string; rest: string; quoted: boolean } | SyntaxReason {
  if (input.startsWith('"')) {
    let i = 1;
    for (;;) {
      const ch = input[i];
      if (ch === undefined) return 'unclosed_quoted_string';
      if (ch === '\\') {
        const next = input.codePointAt(i + 1);
        // quoted-pairSMTP = "\" %d32-126
        if (next === undefined || next < 32 || next > 126) return 'invalid_local_part';
        i += 2;
        continue;
      }
      if (ch === '"') break;
      const cp = input.codePointAt(i)!;
      // qtextSMTP = %d32-33 / %d35-91 / %d93-126 / UTF8-non-ascii
      if (cp < 32 || cp === 127) return 'invalid_local_part';
      i += cp > 0xffff ? 2 : 1;
    }
    const local = input.slice(0, i + 1);
    return { local, rest: input.slice(i + 1), quoted: true };
  }
  const at = input.lastIndexOf('@');
  if (at === -1) return 'no_at_sign';
  const local = input.slice(0, at);
  if (local === '') return 'no_local_part';
  // Dot-string = Atom *("." Atom): no empty atom (leading, trailing or double dot).
  for (const atom of local.split('.')) {
    if (atom === '' || ![...atom].every((c) => ATEXT.test(c))) return 'invalid_local_part';
  }
  return { local, rest: input.slice(at), quoted: false };
}

/** RFC 5321 IPv6-comp: "::" stands for at least 2 zero groups, so at most 6 groups besides it. */
function ipv6CompOk(addr: string): boolean {
  if (!addr.includes('::')) return true;
  const groups = addr.split(':').filter((g) => g !== '');
  const count = groups.reduce((n, g) => n + (g.includes('.') ? 2 : 1), 0);
  return count <= 6;
}

function parseDomain(domain: string): { ascii: string; literal: 'ipv4' | 'ipv6' | null } | SyntaxReason {
  if (domain === '') return 'no_domain';
  if (domain.startsWith('[')) {
    if (!domain.endsWith(']')) return 'invalid_address_literal';
    const inner = domain.slice(1, -1);
    if (isIPv4(inner) && inner.split('.').every((p) => p === '0' || !p.startsWith('0'))) return { ascii: domain, literal: 'ipv4' };
    const v6 = /^IPv6:(.+)$/i.exec(inner);
    if (v6 && isIPv6(v6[1]) && !v6[1].includes('%') && ipv6CompOk(v6[1])) return { ascii: domain, literal: 'ipv6' };
    return 'invalid_address_literal';
  }
  if (octets(domain) > 255) return 'domain_too_long';
  const labels = domain.split('.');
  for (const label of labels) {
    if (label === '') return 'invalid_domain';
    if (octets(label) > 63) return 'label_too_long';
  }
  const ascii = /^[\x00-\x7f]*$/.test(domain) ? domain : domainToASCII(domain);
  if (ascii === '') return 'invalid_domain';
  if (ascii.length > 253) return 'domain_too_long';
  for (const label of ascii.split('.')) {
    if (label.length > 63) return 'label_too_long';
    if (!LDH_LABEL.test(label)) return 'invalid_domain';
  }
  return { ascii: ascii.toLowerCase(), literal: null };
}

export function checkSyntax(raw: string): SyntaxResult {
  const input = raw.normalize('NFC');
  if (input === '') return { ok: false, reason: 'empty' };
  // C0, DEL and C1 controls: never part of an address (UTF8-non-ascii of RFC 6531 means text, not controls).
  if (/[\u0000-\u001f\u007f-\u009f]/.test(input)) return { ok: false, reason: 'control_characters' };
  const local = parseLocal(input);
  if (typeof local === 'string') return { ok: false, reason: local };
  if (!local.rest.startsWith('@')) return { ok: false, reason: local.rest === '' ? 'no_at_sign' : 'invalid_local_part' };
  const domainPart = local.rest.slice(1);
  const d = parseDomain(domainPart);
  if (typeof d === 'string') return { ok: false, reason: d };
  if (octets(local.local) > 64) return { ok: false, reason: 'local_part_too_long' };
  if (octets(input) > 254) return { ok: false, reason: 'address_too_long' };
  const domain = d.literal ? domainPart : domainPart.toLowerCase();
  return { ok: true, local: local.local, domain, asciiDomain: d.ascii, quoted: local.quoted, literal: d.literal, normalized: `${local.local}@${domain}` };
}
