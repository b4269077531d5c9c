import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { testCertificate } from './smtpSink';

/**
 * Agent clients' metadata documents (docs/OAUTH.md "Clients: metadata documents") served over TLS
 * on loopback, one per path, with the tests' self-signed certificate for `localhost`. Motor trusts
 * it through OAUTH_CLIENT_METADATA_CA (`CLIENT_DOCUMENT_ENV`).
 */
export interface ClientDocumentHost { origin: string; docs: Map<string, unknown>; close(): Promise<void> }

export const CLIENT_DOCUMENT_ENV = {
  OAUTH_CLIENT_METADATA_ALLOW_PRIVATE: 'true',
  OAUTH_CLIENT_METADATA_CA: join(tmpdir(), 'motor-test-smtp-cert-v3', 'cert.pem'),
};

export async function startClientDocumentHost(): Promise<ClientDocumentHost> {
  const docs = new Map<string, unknown>();
  const server = https.createServer(testCertificate(), (req, res) => {
    const doc = docs.get(req.url ?? '');
    if (doc === undefined) { res.writeHead(404).end(); return; }
    res.writeHead(200, { 'content-type': 'application/json' }).end(typeof doc === 'string' ? doc : JSON.stringify(doc));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `https://localhost:${(server.address() as AddressInfo).port}`;
  return { origin, docs, close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }) };
}
