import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Real X.509 material for the mTLS tests, made with the openssl CLI (.ci/run installs it) in a
 * fresh temporary directory: CAs and client certificates they issue (EC P-256, quick to make).
 */
export interface TestCa { dir: string; certPath: string; keyPath: string; cert: Buffer }
export interface ClientCert { cert: Buffer; key: Buffer; certPath: string }

const openssl = (args: string[], cwd: string) => execFileSync('openssl', args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });

export function makeCa(name: string): TestCa {
  const dir = mkdtempSync(join(tmpdir(), 'motor-mtls-'));
  openssl([
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '30', '-subj', `/CN=${name}`,
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign',
    '-keyout', 'ca.key', '-out', 'ca.pem',
  ], dir);
  return { dir, certPath: join(dir, 'ca.pem'), keyPath: join(dir, 'ca.key'), cert: readFileSync(join(dir, 'ca.pem')) };
}

let serial = 1000;
export function issueClientCert(ca: TestCa, cn: string): ClientCert {
  const base = `client-${cn.replace(/[^a-z0-9]/gi, '_')}-${serial}`;
  writeFileSync(join(ca.dir, `${base}.ext`), 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n');
  openssl(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-subj', `/CN=${cn}`, '-keyout', `${base}.key`, '-out', `${base}.csr`], ca.dir);
  openssl([
    'x509', '-req', '-in', `${base}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-set_serial', String(serial++), '-days', '10',
    '-extfile', `${base}.ext`, '-out', `${base}.pem`,
  ], ca.dir);
  return { cert: readFileSync(join(ca.dir, `${base}.pem`)), key: readFileSync(join(ca.dir, `${base}.key`)), certPath: join(ca.dir, `${base}.pem`) };
}
