import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

/**
 * The listener's certificate: SMTP_TLS_CERT / SMTP_TLS_KEY when set, otherwise a self-signed one
 * for the configured host name, generated once with openssl under `<dataDir>/smtp-tls/` and reused
 * (development only: clients must be told to skip verification or trust it explicitly).
 */

export interface TlsMaterial {
  key: Buffer; cert: Buffer; selfSigned: boolean;
  /** SMTP_CLIENT_CA: the CA(s) client certificates of mTLS blocks chain to (smtp/mtls.ts); null = no client certificate is asked for. */
  clientCa?: Buffer | null;
}

export async function loadTlsMaterial(opts: { certPath: string | null; keyPath: string | null; dataDir: string; hostname: string; clientCaPath?: string | null }): Promise<TlsMaterial> {
  const clientCa = opts.clientCaPath ? readFileSync(opts.clientCaPath) : null;
  if (opts.certPath && opts.keyPath) {
    return { cert: readFileSync(opts.certPath), key: readFileSync(opts.keyPath), selfSigned: false, clientCa };
  }
  const host = /^[A-Za-z0-9.-]{1,253}$/.test(opts.hostname) ? opts.hostname : 'localhost';
  const dir = join(opts.dataDir, 'smtp-tls');
  const keyPath = join(dir, `${host}.key.pem`);
  const certPath = join(dir, `${host}.cert.pem`);
  if (!existsSync(keyPath) || !existsSync(certPath)) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const tmp = `${process.pid}-${Date.now()}`;
    const san = ['DNS:localhost', 'IP:127.0.0.1', 'IP:::1', ...(host !== 'localhost' ? [`DNS:${host}`] : [])].join(',');
    await promisify(execFile)('openssl', [
      'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '825', '-subj', `/CN=${host}`,
      '-addext', `subjectAltName=${san}`, '-keyout', `${keyPath}.${tmp}`, '-out', `${certPath}.${tmp}`,
    ]);
    // Renames are atomic: a parallel process never reads half a file.
    renameSync(`${keyPath}.${tmp}`, keyPath);
    renameSync(`${certPath}.${tmp}`, certPath);
  }
  return { key: readFileSync(keyPath), cert: readFileSync(certPath), selfSigned: true, clientCa };
}
