/**
 * Mailbox-provider classification (SPEC "providers": gmail, outlook, yahoo, other). The MX host
 * that answered decides: a company domain hosted on Google Workspace is `gmail` although its name
 * says nothing. Recipients never reached (no MX recorded yet, or no MX at all) fall back to the
 * domain name. Pure.
 */
export const PROVIDERS = ['gmail', 'outlook', 'yahoo', 'other'] as const;
export type Provider = (typeof PROVIDERS)[number];

const MX_SUFFIXES: ReadonlyArray<[Provider, readonly string[]]> = [
  ['gmail', ['google.com', 'googlemail.com', 'gmail-smtp-in.l.google.com']],
  ['outlook', ['protection.outlook.com', 'outlook.com', 'hotmail.com', 'olc.protection.outlook.com']],
  ['yahoo', ['yahoodns.net', 'yahoo.com', 'yahoo.net', 'aol.com']],
];

const DOMAIN_PATTERNS: ReadonlyArray<[Provider, RegExp]> = [
  ['gmail', /^(gmail\.com|googlemail\.com)$/],
  ['outlook', /^(outlook|hotmail|live|msn|windowslive|passport)\.[a-z.]+$/],
  ['yahoo', /^(yahoo|ymail|rocketmail|aol|aim)\.[a-z.]+$/],
];

const hostMatches = (host: string, suffix: string): boolean => host === suffix || host.endsWith(`.${suffix}`);

/** Provider of an MX host name, or null when it is not one of the known providers' hosts. */
export function providerOfMx(mx: string | null | undefined): Provider | null {
  if (!mx) return null;
  const host = mx.trim().toLowerCase().replace(/\.$/, '');
  if (host === '') return null;
  for (const [provider, suffixes] of MX_SUFFIXES) if (suffixes.some((s) => hostMatches(host, s))) return provider;
  return 'other';
}

/** Provider guessed from the recipient domain alone. */
export function providerOfDomain(domain: string): Provider {
  const d = domain.trim().toLowerCase();
  for (const [provider, re] of DOMAIN_PATTERNS) if (re.test(d)) return provider;
  return 'other';
}

/** MX first (when one answered), else the domain name. */
export function classifyProvider(domain: string, mx: string | null | undefined): Provider {
  return providerOfMx(mx) ?? providerOfDomain(domain);
}
