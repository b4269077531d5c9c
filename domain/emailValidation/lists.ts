import { createRequire } from 'node:module';

/**
 * The maintained lists behind the `disposable` and `role` flags, from npm packages pinned in
 * package.json (update them with npm like any dependency):
 *  - disposable-email-domains (index.json: domains; wildcard.json: domains whose subdomains are all disposable)
 *  - role-based-email-addresses (local parts naming a function, not a person: info, sales, noreply...)
 */
const load = createRequire(__filename);
const DISPOSABLE = new Set<string>((load('disposable-email-domains/index.json') as string[]).map((d) => d.toLowerCase()));
const DISPOSABLE_WILDCARD = new Set<string>((load('disposable-email-domains/wildcard.json') as string[]).map((d) => d.toLowerCase()));
const ROLES = new Set<string>((load('role-based-email-addresses') as string[]).map((r) => r.toLowerCase()));

/** The domain or one of its parents is on the disposable list (wildcard entries cover subdomains). */
export function isDisposableDomain(asciiDomain: string): boolean {
  const d = asciiDomain.toLowerCase();
  if (DISPOSABLE.has(d)) return true;
  const labels = d.split('.');
  for (let i = 1; i < labels.length - 1; i++) if (DISPOSABLE_WILDCARD.has(labels.slice(i).join('.'))) return true;
  return false;
}

/** The local part (without quotes or a +tag) names a role. */
export function isRoleAccount(local: string): boolean {
  const bare = local.replace(/^"|"$/g, '').toLowerCase().split('+')[0];
  return ROLES.has(bare);
}
