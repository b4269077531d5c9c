import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { X509Certificate } from 'node:crypto';
import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../infra/config';
import { loadTlsMaterial } from '../../smtp/tls';
import { testCertPaths } from './harness';

describe('smtp/tls and SMTP configuration (int)', () => {
  it('generates a self-signed certificate for the host name once, then reuses it', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'motor-smtp-tls-'));
    const a = await loadTlsMaterial({ certPath: null, keyPath: null, dataDir, hostname: 'mail.example.test' });
    expect(a.selfSigned).to.equal(true);
    const x = new X509Certificate(a.cert);
    expect(x.subjectAltName).to.include('DNS:mail.example.test');
    expect(x.checkPrivateKey(await import('node:crypto').then((c) => c.createPrivateKey(a.key)))).to.equal(true);
    const b = await loadTlsMaterial({ certPath: null, keyPath: null, dataDir, hostname: 'mail.example.test' });
    expect(b.cert.equals(a.cert)).to.equal(true);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('reads SMTP_TLS_CERT / SMTP_TLS_KEY files when given', async () => {
    const p = testCertPaths();
    const m = await loadTlsMaterial({ certPath: p.cert, keyPath: p.key, dataDir: '/nonexistent', hostname: 'localhost' });
    expect(m.selfSigned).to.equal(false);
    expect(m.cert.equals(readFileSync(p.cert))).to.equal(true);
  });

  it('validates the SMTP variables', () => {
    const c = loadConfig({});
    expect(c.smtp).to.deep.equal({
      port: 2587, securePort: 2465, tlsCertPath: null, tlsKeyPath: null, maxMessageBytes: 10 * 1024 * 1024, maxRecipients: 50, maxBufferedBytes: 256 * 1024 * 1024, clientCaPath: null, processes: 1,
      softErrorLimit: 10, hardErrorLimit: 20, errorSleepMs: 1000, junkCommandLimit: 100, recipientOvershootLimit: 1000,
      sessionTimeoutSeconds: 1800, dataTimeoutSeconds: 600, idleTimeoutSeconds: 300, maxConnectionsPerAddress: 50, refusalEvents: { limit: 100, windowSeconds: 60 },
      logLines: { perKey: 10, perKind: 1000, windowSeconds: 60 },
    });
    expect(loadConfig({ SMTP_PROCESSES: '4' }).smtp.processes).to.equal(4);
    // A hard limit under the default soft one takes it down with it; a soft limit set above the hard one is refused.
    expect(loadConfig({ SMTP_HARD_ERROR_LIMIT: '5' }).smtp).to.deep.include({ softErrorLimit: 5, hardErrorLimit: 5 });
    expect(loadConfig({ SMTP_SOFT_ERROR_LIMIT: '3', SMTP_HARD_ERROR_LIMIT: '8', SMTP_ERROR_SLEEP_MS: '0' }).smtp).to.deep.include({ softErrorLimit: 3, hardErrorLimit: 8, errorSleepMs: 0 });
    expect(loadConfig({ SMTP_JUNK_COMMAND_LIMIT: '1' }).smtp.junkCommandLimit).to.equal(1);
    expect(loadConfig({ SMTP_JUNK_COMMAND_LIMIT: '10000' }).smtp.junkCommandLimit).to.equal(10000);
    expect(loadConfig({ SMTP_RECIPIENT_OVERSHOOT_LIMIT: '0' }).smtp.recipientOvershootLimit).to.equal(0);
    expect(loadConfig({ SMTP_RECIPIENT_OVERSHOOT_LIMIT: '100000' }).smtp.recipientOvershootLimit).to.equal(100_000);
    const problems = (env: Record<string, string>) => {
      try {
        loadConfig(env);
        return [];
      } catch (e) {
        return (e as ConfigError).problems;
      }
    };
    expect(problems({ SMTP_PORT: '70000' }).join()).to.include('SMTP_PORT');
    expect(problems({ SMTP_TLS_CERT: testCertPaths().cert }).join()).to.include('together');
    expect(problems({ SMTP_TLS_CERT: '/no/such.pem', SMTP_TLS_KEY: '/no/such.key' }).join()).to.include('does not exist');
    expect(problems({ SMTP_MAX_RECIPIENTS: '0' }).join()).to.include('SMTP_MAX_RECIPIENTS');
    expect(problems({ SMTP_PROCESSES: '0' }).join()).to.include('SMTP_PROCESSES');
    expect(problems({ SMTP_HARD_ERROR_LIMIT: '0' }).join()).to.include('SMTP_HARD_ERROR_LIMIT');
    expect(problems({ SMTP_SOFT_ERROR_LIMIT: '30' }).join()).to.include('SMTP_SOFT_ERROR_LIMIT must not exceed SMTP_HARD_ERROR_LIMIT');
    expect(problems({ SMTP_ERROR_SLEEP_MS: '-1' }).join()).to.include('SMTP_ERROR_SLEEP_MS');
    expect(problems({ SMTP_ERROR_SLEEP_MS: '1.5' }).join()).to.include('SMTP_ERROR_SLEEP_MS');
    // As the error limits, no value turns the junk command limit off (Postfix's minimum is 1 too).
    for (const bad of ['0', '-1', '10001', '2.5', 'none']) {
      expect(problems({ SMTP_JUNK_COMMAND_LIMIT: bad })).to.deep.equal([`SMTP_JUNK_COMMAND_LIMIT must be an integer between 1 and 10000 (got "${bad}")`]);
    }
    for (const bad of ['-1', '100001', '2.5', 'none']) {
      expect(problems({ SMTP_RECIPIENT_OVERSHOOT_LIMIT: bad })).to.deep.equal([`SMTP_RECIPIENT_OVERSHOOT_LIMIT must be an integer between 0 and 100000 (got "${bad}")`]);
    }
    expect(loadConfig({ SMTP_SESSION_TIMEOUT_SECONDS: '86400', SMTP_DATA_TIMEOUT_SECONDS: '86400' }).smtp).to.deep.include({ sessionTimeoutSeconds: 86_400, dataTimeoutSeconds: 86_400 });
    // A session deadline under the default DATA deadline takes it down with it; a DATA deadline set above the session's is refused.
    expect(loadConfig({ SMTP_SESSION_TIMEOUT_SECONDS: '60' }).smtp).to.deep.include({ sessionTimeoutSeconds: 60, dataTimeoutSeconds: 60 });
    expect(loadConfig({ SMTP_SESSION_TIMEOUT_SECONDS: '1', SMTP_DATA_TIMEOUT_SECONDS: '1' }).smtp).to.deep.include({ sessionTimeoutSeconds: 1, dataTimeoutSeconds: 1 });
    expect(problems({ SMTP_SESSION_TIMEOUT_SECONDS: '120', SMTP_DATA_TIMEOUT_SECONDS: '121' })).to.deep.equal(['SMTP_DATA_TIMEOUT_SECONDS must not exceed SMTP_SESSION_TIMEOUT_SECONDS']);
    // The idle timeout: RFC 5321 §4.5.3.2.7's 5 minutes unless set; a shorter session deadline takes it down with it.
    expect(loadConfig({}).smtp.idleTimeoutSeconds).to.equal(300);
    expect(loadConfig({ SMTP_IDLE_TIMEOUT_SECONDS: '30' }).smtp.idleTimeoutSeconds).to.equal(30);
    expect(loadConfig({ SMTP_SESSION_TIMEOUT_SECONDS: '120' }).smtp.idleTimeoutSeconds).to.equal(120);
    expect(problems({ SMTP_SESSION_TIMEOUT_SECONDS: '120', SMTP_IDLE_TIMEOUT_SECONDS: '121' })).to.deep.equal(['SMTP_IDLE_TIMEOUT_SECONDS must not exceed SMTP_SESSION_TIMEOUT_SECONDS']);
    expect(loadConfig({ SMTP_MAX_CONNECTIONS_PER_ADDRESS: '1' }).smtp.maxConnectionsPerAddress).to.equal(1);
    for (const bad of ['0', '100001', '2.5', 'none']) {
      expect(problems({ SMTP_MAX_CONNECTIONS_PER_ADDRESS: bad })).to.deep.equal([`SMTP_MAX_CONNECTIONS_PER_ADDRESS must be an integer between 1 and 100000 (got "${bad}")`]);
    }
    for (const bad of ['0', '3601', '2.5', 'none']) {
      expect(problems({ SMTP_IDLE_TIMEOUT_SECONDS: bad })).to.deep.equal([`SMTP_IDLE_TIMEOUT_SECONDS must be an integer between 1 and 3600 (got "${bad}")`]);
    }
    for (const bad of ['0', '86401', '2.5', 'none']) {
      expect(problems({ SMTP_SESSION_TIMEOUT_SECONDS: bad })).to.deep.equal([`SMTP_SESSION_TIMEOUT_SECONDS must be an integer between 1 and 86400 (got "${bad}")`]);
      expect(problems({ SMTP_DATA_TIMEOUT_SECONDS: bad })).to.deep.equal([`SMTP_DATA_TIMEOUT_SECONDS must be an integer between 1 and 86400 (got "${bad}")`]);
    }
    expect(problems({ SMTP_REFUSAL_EVENT_LIMIT: '0' }).join()).to.include('SMTP_REFUSAL_EVENT_LIMIT');
    expect(problems({ SMTP_REFUSAL_EVENT_WINDOW_SECONDS: '0' }).join()).to.include('SMTP_REFUSAL_EVENT_WINDOW_SECONDS');
    expect(loadConfig({ SMTP_LOG_LINE_LIMIT: '1', SMTP_LOG_LINE_KIND_LIMIT: '1', SMTP_LOG_WINDOW_SECONDS: '3600' }).smtp.logLines).to.deep.equal({ perKey: 1, perKind: 1, windowSeconds: 3600 });
    for (const bad of ['0', '100001', '2.5', 'none']) {
      expect(problems({ SMTP_LOG_LINE_LIMIT: bad })).to.deep.equal([`SMTP_LOG_LINE_LIMIT must be an integer between 1 and 100000 (got "${bad}")`]);
      expect(problems({ SMTP_LOG_LINE_KIND_LIMIT: bad })).to.deep.equal([`SMTP_LOG_LINE_KIND_LIMIT must be an integer between 1 and 100000 (got "${bad}")`]);
    }
    expect(problems({ SMTP_LOG_WINDOW_SECONDS: '0' }).join()).to.include('SMTP_LOG_WINDOW_SECONDS');
    expect(problems({ SMTP_LOG_WINDOW_SECONDS: '3601' }).join()).to.include('SMTP_LOG_WINDOW_SECONDS');
    expect(problems({ SMTP_LOG_LINE_LIMIT: '50', SMTP_LOG_LINE_KIND_LIMIT: '20' })).to.deep.equal(['SMTP_LOG_LINE_LIMIT must not exceed SMTP_LOG_LINE_KIND_LIMIT']);
    // The memory budget for messages being received: at least the largest message either listener takes.
    expect(loadConfig({ SMTP_MAX_BUFFERED_BYTES: '614400', SMTP_MAX_MESSAGE_BYTES: '409600' }).smtp).to.deep.include({ maxBufferedBytes: 614_400, maxMessageBytes: 409_600 });
    expect(loadConfig({ SMTP_MAX_BUFFERED_BYTES: '409600', SMTP_MAX_MESSAGE_BYTES: '409600' }).smtp.maxBufferedBytes).to.equal(409_600);
    expect(problems({ SMTP_MAX_BUFFERED_BYTES: '409599', SMTP_MAX_MESSAGE_BYTES: '409600' })).to.deep.equal(['SMTP_MAX_BUFFERED_BYTES must not be below SMTP_MAX_MESSAGE_BYTES']);
    // Below the default largest message (10 MiB).
    expect(problems({ SMTP_MAX_BUFFERED_BYTES: String(8 * 1024 * 1024) })).to.deep.equal(['SMTP_MAX_BUFFERED_BYTES must not be below SMTP_MAX_MESSAGE_BYTES']);
    // The inbound listener's largest report counts only where it runs (BOUNCE_DOMAIN, INBOUND_SMTP_PORT not 0).
    const inbound = { SMTP_MAX_BUFFERED_BYTES: '2097152', SMTP_MAX_MESSAGE_BYTES: '1048576', INBOUND_MAX_MESSAGE_BYTES: '3145728' };
    expect(loadConfig(inbound).smtp.maxBufferedBytes).to.equal(2_097_152);
    expect(problems({ ...inbound, BOUNCE_DOMAIN: 'bounces.example.com' })).to.deep.equal(['SMTP_MAX_BUFFERED_BYTES must not be below INBOUND_MAX_MESSAGE_BYTES']);
    expect(loadConfig({ ...inbound, BOUNCE_DOMAIN: 'bounces.example.com', INBOUND_SMTP_PORT: '0' }).smtp.maxBufferedBytes).to.equal(2_097_152);
    for (const bad of ['1023', '68719476737', '2.5', 'none', '-1']) {
      expect(problems({ SMTP_MAX_BUFFERED_BYTES: bad })).to.deep.equal([`SMTP_MAX_BUFFERED_BYTES must be an integer between 1024 and 68719476736 (got "${bad}")`]);
    }
    expect(problems({ SMTP_PROCESSES: 'two' }).join()).to.include('SMTP_PROCESSES');
    expect(problems({ SMTP_PORT: '2525', SMTPS_PORT: '2525' }).join()).to.include('must differ');
    expect(problems({ SMTP_CLIENT_CA: '/no/such-ca.pem' }).join()).to.include('SMTP_CLIENT_CA names a file that does not exist');
    for (const bad of ['0', '70000', '2587,x', ',', '587;465']) expect(problems({ SMTP_PUBLIC_PORTS: bad }).join(), bad).to.include('SMTP_PUBLIC_PORTS');
  });

  it('SMTP_PUBLIC_PORTS (the ports POST /v1/test-email may contact): the listeners\' ports, unless a proxy publishes others', () => {
    expect(loadConfig({}).smtpPublicPorts).to.deep.equal([2587, 2465]);
    expect(loadConfig({ SMTP_PORT: '587', SMTPS_PORT: '465' }).smtpPublicPorts).to.deep.equal([587, 465]);
    // Port 0 binds any free port: no port a client could be given.
    expect(loadConfig({ SMTP_PORT: '0', SMTPS_PORT: '0' }).smtpPublicPorts).to.deep.equal([]);
    expect(loadConfig({ SMTP_PORT: '0', SMTPS_PORT: '0', SMTP_PUBLIC_PORTS: '587, 465,587' }).smtpPublicPorts).to.deep.equal([587, 465]);
    // Set, they replace the listeners' ports (on the public host, those are the proxy's, not the listeners').
    expect(loadConfig({ SMTP_PUBLIC_PORTS: '587' }).smtpPublicPorts).to.deep.equal([587]);
  });
});
