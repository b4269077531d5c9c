import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A test certificate authority, and certificates it issues for given host names: what a real MX
 * or MTA-STS policy host presents, for tests that verify certificates (DELIVERY_TLS_CA_FILE points
 * at `caPath`). Made once with openssl and cached in the temp dir; each piece is written in a
 * directory of its own and renamed into place, so parallel test processes never see half of one.
 */
const ROOT = join(tmpdir(), 'motor-test-ca-v1');

function once(dir: string, make: (into: string) => void): string {
  if (existsSync(dir)) return dir;
  mkdirSync(ROOT, { recursive: true });
  const into = mkdtempSync(join(ROOT, 'tmp-'));
  make(into);
  try {
    renameSync(into, dir);
  } catch {
    rmSync(into, { recursive: true, force: true }); // another process got there first: use its copy
  }
  return dir;
}

const openssl = (args: string[]): void => void execFileSync('openssl', args, { stdio: 'ignore' });

function caDir(): string {
  return once(join(ROOT, 'ca'), (into) => openssl([
    'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '3650', '-subj', '/CN=Motor Test CA',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign',
    '-keyout', join(into, 'key.pem'), '-out', join(into, 'cert.pem'),
  ]));
}

/** The CA certificate (PEM) and its path. */
export function testCa(): { cert: Buffer; certPath: string } {
  const certPath = join(caDir(), 'cert.pem');
  return { cert: readFileSync(certPath), certPath };
}

/** A certificate for `names` (DNS names, the first also the CN) issued by the test CA. */
export function issuedCertificate(names: string[]): { key: Buffer; cert: Buffer } {
  const ca = caDir();
  const id = createHash('sha256').update(names.join(',')).digest('hex').slice(0, 16);
  const dir = once(join(ROOT, `leaf-${id}`), (into) => {
    const ext = join(into, 'ext.cnf');
    writeFileSync(ext, `subjectAltName=${names.map((n) => `DNS:${n}`).join(',')}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n`);
    openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${names[0]}`, '-keyout', join(into, 'key.pem'), '-out', join(into, 'req.csr')]);
    openssl([
      'x509', '-req', '-in', join(into, 'req.csr'), '-CA', join(ca, 'cert.pem'), '-CAkey', join(ca, 'key.pem'),
      '-set_serial', `0x${id}`, '-days', '3650', '-extfile', ext, '-out', join(into, 'cert.pem'),
    ]);
  });
  return { key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) };
}
