/**
 * Typo suggestions for the mailbox providers most addresses use ("gmial.com" → "gmail.com",
 * "yahoo.con" → "yahoo.com"). Optimal-string-alignment distance (a transposition counts as one
 * edit), at most 1 edit for domains up to 6 characters before the TLD, 2 beyond. Pure.
 */

export const COMMON_PROVIDERS = [
  'gmail.com', 'googlemail.com', 'yahoo.com', 'yahoo.co.uk', 'yahoo.fr', 'ymail.com', 'hotmail.com', 'hotmail.co.uk', 'hotmail.fr',
  'outlook.com', 'live.com', 'msn.com', 'icloud.com', 'me.com', 'mac.com', 'aol.com', 'protonmail.com', 'proton.me', 'gmx.com',
  'gmx.de', 'gmx.net', 'web.de', 't-online.de', 'yandex.ru', 'mail.ru', 'zoho.com', 'fastmail.com', 'comcast.net', 'verizon.net',
  'att.net', 'orange.fr', 'free.fr', 'libero.it', 'qq.com', '163.com', 'naver.com',
] as const;

const COMMON_TLDS: Record<string, string> = { con: 'com', cmo: 'com', ocm: 'com', coom: 'com', comm: 'com', vom: 'com', xom: 'com', cm: 'com', co: 'co', nte: 'net', ent: 'net', nett: 'net', ogr: 'org', prg: 'org' };

export function editDistance(a: string, b: string, max = 3): number {
  if (Math.abs(a.length - b.length) > max) return max + 1;
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...new Array<number>(b.length).fill(0)]);
  for (let j = 0; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.length][b.length];
}

/** A corrected domain, or null when the domain is a known provider or nothing is close. */
export function suggestDomain(domain: string): string | null {
  const d = domain.toLowerCase();
  if ((COMMON_PROVIDERS as readonly string[]).includes(d)) return null;
  let best: { p: string; dist: number } | null = null;
  for (const p of COMMON_PROVIDERS) {
    const allowed = p.split('.')[0].length <= 6 ? 1 : 2;
    const dist = editDistance(d, p, allowed);
    if (dist <= allowed && (!best || dist < best.dist)) best = { p, dist };
  }
  if (best) return best.p;
  const labels = d.split('.');
  const tld = labels[labels.length - 1];
  if (labels.length >= 2 && COMMON_TLDS[tld] && COMMON_TLDS[tld] !== tld) return [...labels.slice(0, -1), COMMON_TLDS[tld]].join('.');
  return null;
}
