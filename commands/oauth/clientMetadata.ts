import { readFileSync } from 'node:fs';
import https from 'node:https';
import { rootCertificates } from 'node:tls';
import { isAcceptableRedirectUri, oauthError } from '../../domain/oauth/grant';
import { isClientMetadataUrl } from '../../domain/oauth/agent';
import { TtlCache } from '../../infra/ttlCache';
import { isPublicAddress, pinnedLookup, resolveHost, systemLookup, untilAborted, type Address } from '../../infra/outboundAddress';

/**
 * Agent clients register by a metadata document (SPEC "OAuth 2.1 for agent clients", docs/OAUTH.md):
 * the client_id is an https URL serving JSON whose own `client_id` equals that URL. Dynamic
 * registration does not exist. The URL is anyone's, so fetching it is guarded like a webhook:
 * the host's addresses must be public (unless OAUTH_CLIENT_METADATA_ALLOW_PRIVATE), the socket is
 * pinned to the checked addresses, no redirect is followed, the answer is capped at 64 KiB and
 * 5 s. A document is kept 5 minutes per process; a failed fetch is not kept.
 */

export interface ClientMetadata {
  clientId: string;
  /** `client_name`, else the URL's host. */
  name: string;
  redirectUris: string[];
}

export interface ClientMetadataSettings { allowPrivateAddresses: boolean; caFile: string | null }

const MAX_BYTES = 64 * 1024;
const TIMEOUT_MS = 5000;
const CACHE_MS = 5 * 60_000;

const invalidClient = (why: string) => oauthError('invalid_client', `Client metadata document refused: ${why}`);

export class ClientMetadataFetcher {
  private readonly cache = new TtlCache<ClientMetadata>(CACHE_MS);
  private readonly ca: string[];

  constructor(private readonly settings: ClientMetadataSettings, private readonly lookup = systemLookup) {
    this.ca = settings.caFile ? [...rootCertificates, readFileSync(settings.caFile, 'utf8')] : [...rootCertificates];
  }

  /** The client's metadata, or 400 invalid_client saying why it cannot be used. */
  get(clientId: string): Promise<ClientMetadata> {
    if (!isClientMetadataUrl(clientId)) return Promise.reject(invalidClient('client_id is not an https URL with a path'));
    return this.cache.get(clientId, () => this.fetch(clientId));
  }

  private async fetch(clientId: string): Promise<ClientMetadata> {
    const url = new URL(clientId);
    const deadline = AbortSignal.timeout(TIMEOUT_MS);
    let addresses: Address[];
    try {
      addresses = await untilAborted(resolveHost(url.hostname, this.lookup), deadline);
    } catch {
      throw invalidClient(`the host ${url.hostname} does not resolve`);
    }
    if (!this.settings.allowPrivateAddresses && !addresses.every((a) => isPublicAddress(a.address))) throw invalidClient('the host resolves to a private address');
    const text = await this.download(url, addresses, deadline);
    let doc: unknown;
    try { doc = JSON.parse(text); } catch { throw invalidClient('not JSON'); }
    return parseClientMetadata(clientId, doc);
  }

  private download(url: URL, addresses: Address[], deadline: AbortSignal): Promise<string> {
    return new Promise((resolve, reject) => {
      const req = https.request(url, {
        method: 'GET', agent: false, lookup: pinnedLookup(addresses), ca: this.ca, signal: deadline,
        headers: { accept: 'application/json', 'user-agent': 'Motor-OAuth/1.2' },
      });
      req.on('error', (e) => reject(invalidClient(deadline.aborted ? 'the fetch timed out' : `the fetch failed (${(e as NodeJS.ErrnoException).code ?? e.message})`)));
      req.on('response', (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          return reject(invalidClient(`the URL answered ${res.statusCode}`));
        }
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > MAX_BYTES) {
            req.destroy();
            reject(invalidClient('the document is over 64 KiB'));
          } else chunks.push(c);
        });
        res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
        res.on('error', () => reject(invalidClient('the answer was cut short')));
      });
      req.end();
    });
  }
}

/**
 * The document's fields Motor uses: `client_id` (must equal the URL), `redirect_uris` (1 to 10
 * acceptable URIs), `client_name` (optional, up to 100 printable characters), and
 * `token_endpoint_auth_method`, which must be `none` when present: an agent client is public and
 * proves itself with PKCE.
 */
export function parseClientMetadata(clientId: string, doc: unknown): ClientMetadata {
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw invalidClient('not a JSON object');
  const d = doc as Record<string, unknown>;
  if (d.client_id !== clientId) throw invalidClient('its client_id differs from the URL it is served at');
  const uris = d.redirect_uris;
  if (!Array.isArray(uris) || uris.length === 0 || uris.length > 10 || !uris.every(isAcceptableRedirectUri)) {
    throw invalidClient('redirect_uris must list 1 to 10 absolute https URIs (http only on loopback), without fragment');
  }
  if (d.token_endpoint_auth_method !== undefined && d.token_endpoint_auth_method !== 'none') throw invalidClient('token_endpoint_auth_method must be none');
  const name = typeof d.client_name === 'string' && d.client_name.trim() !== '' && d.client_name.length <= 100 && !/[\u0000-\u001f]/.test(d.client_name)
    ? d.client_name.trim() : new URL(clientId).host;
  return { clientId, name, redirectUris: [...new Set(uris as string[])] };
}
