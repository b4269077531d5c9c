/** Public API scopes (SPEC "Scopes") and their implications. */
export const SCOPES = [
  'logs.read', 'analytics.read', 'usage.read', 'config.read', 'config.manage', 'logs.pii',
  'webhooks.read', 'webhooks.manage', 'sandbox.manage', 'recipients.manage',
] as const;
export type Scope = (typeof SCOPES)[number];

const IMPLIES: Partial<Record<Scope, Scope[]>> = {
  'config.manage': ['config.read'],
  'webhooks.manage': ['webhooks.read'],
};

export const isScope = (s: string): s is Scope => (SCOPES as readonly string[]).includes(s);

/** The scopes a grant effectively holds, implications included. */
export function expandScopes(granted: readonly string[]): Set<Scope> {
  const out = new Set<Scope>();
  for (const s of granted) {
    if (!isScope(s)) continue;
    out.add(s);
    for (const implied of IMPLIES[s] ?? []) out.add(implied);
  }
  return out;
}

/** True when the grant covers every required scope. */
export const hasScopes = (granted: readonly string[], required: readonly string[]): boolean => {
  const eff = expandScopes(granted);
  return required.every((r) => eff.has(r as Scope));
};
