import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { dashboardTokenSettings, signDashboardToken } from '../../commands/auth/dashboardTokens';
import { newId } from '../../domain/ids';
import { streamName } from '../../domain/eventStore';
import { toEventData } from '../../domain/events';
import { foldSession, startSession } from '../../domain/account/session';
import { getJson, postJson, startTestMotor, type TestMotor } from '../support/motor';
import { PASSWORD, startAuthHarness, type AuthHarness } from './harness';

describe('API request limit on account routes (int)', function () {
  this.timeout(90_000);

  describe('with Redis', () => {
    let h: AuthHarness;
    before(async () => { h = await startAuthHarness({ API_REQUEST_LIMIT: '3', ANONYMOUS_REQUEST_LIMIT: '4' }); });
    after(async () => { await h?.close(); });

    it('per dashboard session: X-RateLimit-* on every answer, 429 rate_limited over the limit', async () => {
      // The limiter counts in fixed wall-clock minutes: start early in a minute, so that the sign-up,
      // the session's requests and the login all fall in one window on a slow machine too.
      const msLeft = 60_000 - (Date.now() % 60_000);
      if (msLeft < 25_000) await new Promise((r) => setTimeout(r, msLeft + 100));
      // A client IP of this test's own (X-Forwarded-For is trusted from loopback): the per-IP
      // counters live in the shared Redis, and other suites count 127.0.0.1 in the same minute.
      const ip = { 'x-forwarded-for': `2001:db8::${randomBytes(6).toString('hex').match(/.{4}/g)!.join(':')}` };
      const s = await h.signUp('limits@rcpt.test', PASSWORD, ip); // register, verify-code, set-password: 3 of the IP's 4
      const auth = { authorization: `Bearer ${s.token}` };
      for (let i = 0; i < 3; i++) {
        const r = await getJson(`${h.motor.baseUrl}/api/account/api-keys`, auth);
        expect(r.status).to.equal(200);
        expect(r.headers.get('x-ratelimit-limit')).to.equal('3');
        expect(r.headers.get('x-ratelimit-remaining')).to.equal(String(2 - i));
        expect(Number(r.headers.get('x-ratelimit-reset'))).to.be.within(1, 60);
      }
      const over = await getJson(`${h.motor.baseUrl}/api/account/api-keys`, auth);
      expect(over.status).to.equal(429);
      expect(over.body.code).to.equal('rate_limited');
      expect(Number(over.headers.get('retry-after'))).to.be.within(1, 60);

      // Routes without a credential count per client IP.
      const login = await postJson(`${h.motor.baseUrl}/api/auth/login`, { email: 'limits@rcpt.test', password: PASSWORD }, ip);
      expect(login.status).to.equal(200);
      expect(login.headers.get('x-ratelimit-limit')).to.equal('4');
      expect(login.headers.get('x-ratelimit-remaining')).to.equal('0');
      const again = await postJson(`${h.motor.baseUrl}/api/auth/login`, { email: 'limits@rcpt.test', password: PASSWORD }, ip);
      expect(again.status).to.equal(429);
      expect(again.body.code).to.equal('rate_limited');
    });
  });

  describe('without Redis', () => {
    let motor: TestMotor;
    before(async () => { motor = await startTestMotor({ roles: ['api', 'projector'], redisUrl: 'redis://127.0.0.1:1' }); });
    after(async () => { await motor?.close(); });

    it('answers with X-RateLimit-Remaining: unknown', async () => {
      const session = { userId: newId(), accountId: newId(), sessionId: newId() };
      await motor.rt.store.append(streamName('authSession', session.sessionId), startSession(foldSession([]), { ...session, channel: 'web', refreshTokenHash: 'aa', now: new Date() })
        .map((e) => toEventData(newId(), e)), { expectedRevision: 'no_stream' });
      const token = signDashboardToken(dashboardTokenSettings(motor.config), session, new Date()).token;
      const r = await getJson(`${motor.baseUrl}/api/account/api-keys`, { authorization: `Bearer ${token}` });
      expect(r.status).to.equal(200);
      expect(r.headers.get('x-ratelimit-remaining')).to.equal('unknown');
      const anon = await postJson(`${motor.baseUrl}/api/auth/login`, { email: 'x@rcpt.test', password: 'whatever-password' });
      expect(anon.status).to.equal(401);
      expect(anon.headers.get('x-ratelimit-remaining')).to.equal('unknown');
    });
  });
});
