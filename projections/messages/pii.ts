/**
 * Masking of e-mail addresses for responses without includePII: the first character of the local
 * part and of the domain, then `***`, keeping the top-level domain: `john.doe@example.com` →
 * `j***@e***.com`. Pure; callers decide when to mask.
 */
export function maskEmail(address: string): string {
  const a = address.trim();
  const at = a.lastIndexOf('@');
  if (at < 0) return a.length === 0 ? '' : `${a[0]}***`;
  const local = a.slice(0, at);
  const domain = a.slice(at + 1);
  const maskedLocal = local.length === 0 ? '***' : `${local[0]}***`;
  const dot = domain.lastIndexOf('.');
  if (domain.length === 0) return `${maskedLocal}@***`;
  if (dot <= 0) return `${maskedLocal}@${domain[0]}***`;
  return `${maskedLocal}@${domain[0]}***${domain.slice(dot)}`;
}

/** Masks every address of a list (convenience for recipients arrays). */
export const maskEmails = (addresses: readonly string[]): string[] => addresses.map(maskEmail);

/**
 * Free text with every address in it masked: a receiving server's reply often quotes the recipient
 * (`550 5.1.1 <john@example.com>: Recipient address rejected`, `john@example.com... User unknown`),
 * so an SMTP response is recipient data like the address itself. Brackets, quotes and the dots
 * that end a sentence stay outside the address.
 */
const ADDRESS_IN_TEXT = /[^\s<>()[\]{},;:"'@]+@[^\s<>()[\]{},;:"'@]+/g;
export function maskEmailsInText(text: string): string {
  return text.replace(ADDRESS_IN_TEXT, (found) => {
    const address = found.replace(/\.+$/, '');
    return maskEmail(address) + found.slice(address.length);
  });
}
