import type { Scope } from '../../domain/credentials/scopes';

/** Who is calling, as established by read-api/http/authentication.ts. */
export type Principal =
  | { kind: 'blockApiKey'; keyId: string; accountId: string; motorBlockId: string }
  | { kind: 'accountApiKey'; keyId: string; accountId: string; scopes: string[] }
  | { kind: 'publicBearer'; tokenId: string; accountId: string; motorBlockId: string; scopes: Scope[]; userId: string; clientId: string; expiresAt: Date }
  /** A signed-in dashboard user (dashboard JWT, docs/AUTH.md): acts on its whole account. */
  | { kind: 'dashboard'; tokenId: string; userId: string; accountId: string; sessionId: string };

export type PrincipalOf<K extends Principal['kind']> = Extract<Principal, { kind: K }>;

/** Id the API request limiter counts by. */
export function credentialId(p: Principal): string {
  switch (p.kind) {
    case 'blockApiKey':
    case 'accountApiKey':
      return `key:${p.keyId}`;
    case 'publicBearer':
      return `token:${p.tokenId}`;
    case 'dashboard':
      // Per session (a refresh does not reset the window).
      return `session:${p.sessionId}`;
  }
}
