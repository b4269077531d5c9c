import { parseApiKey, secretMatches, type ApiKeyKind } from '../../domain/credentials/apiKeys';
import { fail } from '../../domain/errors';
import type { ApiKeyRecord } from '../../projections/directory/queries';
import type { DirectoryCache } from '../directoryCache';

/** Reads the key from `Authorization: ApiKey <key>` or `X-Api-Key: <key>`. */
export function extractApiKey(headers: { authorization?: string; 'x-api-key'?: string | string[] }): string | null {
  const auth = headers.authorization;
  if (typeof auth === 'string') {
    const m = /^ApiKey\s+(\S+)\s*$/i.exec(auth);
    if (m) return m[1];
  }
  const x = headers['x-api-key'];
  if (typeof x === 'string' && x.trim() !== '') return x.trim();
  return null;
}

/**
 * Authenticates an API key of the expected kind. Missing, malformed, truncated, masked, unknown,
 * revoked and wrong-kind keys all fail the same way (401 invalid_api_key), so a caller learns
 * nothing about which keys exist.
 */
export async function authenticateApiKey(directory: DirectoryCache, raw: string | null, kind: ApiKeyKind): Promise<ApiKeyRecord> {
  const invalid = () => fail('invalid_api_key', 401, 'Invalid API key format', {
    nextAction: kind === 'block'
      ? 'Send a Motor Block API key (mk_live_...) in Authorization: ApiKey <key> or X-Api-Key.'
      : 'Send an account API key (ak_live_...) in Authorization: ApiKey <key> or X-Api-Key.',
  });
  if (raw === null) throw invalid();
  const parsed = parseApiKey(raw);
  if (!parsed || parsed.kind !== kind) throw invalid();
  const record = await directory.apiKeyByPrefix(parsed.prefix);
  if (!record || record.kind !== kind || record.revokedAt !== null || !secretMatches(parsed.secret, record.secretHash)) throw invalid();
  return record;
}
