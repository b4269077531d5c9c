import { expect } from 'chai';
import { simpleParser } from 'mailparser';
import { systemIds } from '../../commands/auth/systemMail';
import { streamName } from '../../domain/eventStore';
import type { FreeRecipientRequested, MessageAccepted, SmtpSubmissionRefused } from '../../domain/events';
import { newId } from '../../domain/ids';
import { rawSession, rfc822, transport } from '../smtp/harness';
import { bearer, eventually, getJson, postJson, startSandboxHarness, uniq, type SandboxHarness } from './harness';

/**
 * Free recipients over real HTTP, SMTP and DNS on loopback (docs/SANDBOX.md): the confirmation
 * mail travels the delivery pipeline to the loopback MX, the link from the captured mail confirms,
 * and the Free-plan rule is enforced on HTTP and SMTP sends.
 */
describe('Free recipients (integration)', function () {
  this.timeout(120_000);
  let h: SandboxHarness;
  let acct: Awaited<ReturnType<SandboxHarness['bootstrapAccount']>>;
  let token: string;
  const path = '/api/public/v1/account/free-recipients';

  /** The confirmation token of the latest mail to `email` after index `after`. */
  const linkTokenFor = async (email: string, after = 0): Promise<string> => eventually(async () => {
    const raws = h.mailsTo(email, after);
    if (raws.length === 0) return null;
    const text = (await simpleParser(raws[raws.length - 1])).text ?? '';
    return /\/free-recipients\/confirm\?token=(fr_[0-9a-f]{32}_[A-Za-z0-9_-]{43})/.exec(text)?.[1] ?? null;
  }, 20_000);
  const list = async (t = token) => (await getJson(h.url(path), bearer(t))).body.data;
  const ask = (email: unknown, t = token) => postJson(h.url(path), { email }, bearer(t));
  const confirmForm = (tok: string) =>
    fetch(h.url('/free-recipients/confirm'), { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ token: tok }).toString() });
  const send = (to: string[], extra: Record<string, unknown> = {}) =>
    postJson(h.url('/v1/send'), { from: `app@${acct.domain}`, to, subject: 'free plan', text: 'hi', ...extra }, { authorization: `ApiKey ${acct.apiKey}` });

  before(async () => {
    h = await startSandboxHarness({ FREE_RECIPIENT_LIMIT: '3', FREE_RECIPIENT_POSTS_PER_MINUTE: '20', FREE_RECIPIENT_RESEND_COOLDOWN_SECONDS: '5' });
    acct = await h.bootstrapAccount('free');
    token = await h.motor.token(acct, ['recipients.manage']);
  });
  after(async () => {
    await h?.close();
  });

  it('GET: empty list with limit, usage and limitsNote; needs recipients.manage', async () => {
    const d = await list();
    expect(d).to.deep.include({ recipients: [], limit: 3, usage: 0 });
    expect(d.limitsNote).to.be.a('string').and.match(/3 addresses/);
    const other = await h.motor.token(acct, ['config.read']);
    const r = await getJson(h.url(path), bearer(other));
    expect([r.status, r.body.code]).to.deep.equal([403, 'insufficient_scope']);
  });

  it('POST refuses an invalid address (400 invalid_email) and the own address (400 own_address)', async () => {
    for (const bad of ['not-an-address', '', 'a@b', 12, undefined]) {
      const r = await ask(bad);
      expect([r.status, r.body.code], String(bad)).to.deep.equal([400, 'invalid_email']);
    }
    const own = await ask(` ${acct.email} `);
    expect([own.status, own.body.code]).to.deep.equal([400, 'own_address']);
  });

  let friend: string;
  let firstToken: string;

  it('POST: pending, a link is mailed; asked again within the cooldown: identical answer, no mail', async () => {
    friend = `friend-${uniq()}@rcpt.test`;
    const r1 = await ask(friend);
    const r2 = await ask(friend.toUpperCase());
    expect(r1.status).to.equal(200);
    expect(r1.body.data).to.deep.equal({ recipient: { email: friend, status: 'pending' } });
    expect(r2.status).to.equal(r1.status);
    expect(r2.body).to.deep.equal(r1.body);
    // Withheld: no second request on the stream, so no second mail (a mail is only sent for a recorded request).
    const requests = (await h.motor.rt.store.readStream(streamName('freeRecipients', acct.accountId))).filter((e) => e.type === 'FreeRecipientRequested');
    expect(requests).to.have.length(1);
    firstToken = await linkTokenFor(friend);
    await new Promise((r) => setTimeout(r, 500));
    expect(h.mailsTo(friend)).to.have.length(1);

    const d = await list();
    expect(d.usage).to.equal(1);
    expect(d.recipients).to.have.length(1);
    expect(d.recipients[0]).to.include({ email: friend, status: 'pending' });
    expect(d.recipients[0].id).to.match(/^[0-9a-f-]{36}$/);

    // Only the token's hash is in the log.
    const events = await h.motor.rt.store.readStream(streamName('freeRecipients', acct.accountId));
    const requested = events.find((e) => e.type === 'FreeRecipientRequested')!.data as FreeRecipientRequested;
    expect(JSON.stringify(events.map((e) => e.data))).to.not.include(firstToken);
    expect(requested.tokenHash).to.match(/^[0-9a-f]{64}$/);
  });

  it('the Free-plan rule: pending addresses and strangers are refused (HTTP real and dry run), the own address passes', async () => {
    const r = await send([friend, 'stranger@rcpt.test']);
    expect(r.status).to.equal(403);
    expect(r.body.code).to.equal('recipient_not_permitted');
    expect(r.body.refusedRecipients).to.deep.equal([friend, 'stranger@rcpt.test']);
    expect(r.body.nextAction).to.match(/free-recipients/);
    const dry = await send([friend], { dryRun: true });
    expect([dry.status, dry.body.code]).to.deep.equal([403, 'recipient_not_permitted']);
    const own = await send([acct.email]);
    expect(own.status).to.equal(200);
  });

  it('the page: forged or malformed tokens get nothing; GET shows the form and changes nothing; the API cannot confirm', async () => {
    const forged = `fr_${acct.accountId.replace(/-/g, '')}_${'A'.repeat(43)}`;
    const f = await fetch(h.url(`/free-recipients/confirm?token=${forged}`));
    expect(f.status).to.equal(404);
    expect(await f.text()).to.include('data-outcome="invalid"');
    expect((await fetch(h.url('/free-recipients/confirm'))).status).to.equal(404);
    expect((await fetch(h.url('/free-recipients/confirm?token=garbage'))).status).to.equal(404);
    expect((await confirmForm(forged)).status).to.equal(404);

    const page = await fetch(h.url(`/free-recipients/confirm?token=${firstToken}`));
    expect(page.status).to.equal(200);
    expect(page.headers.get('content-type')).to.match(/text\/html/);
    const html = await page.text();
    expect(html).to.include('data-outcome="confirm"').and.include('<form method="post" action="/free-recipients/confirm">');

    const sneaky = await postJson(h.url(path), { email: friend, status: 'confirmed' }, bearer(token));
    expect(sneaky.status).to.be.oneOf([400, 422]);
    expect((await list()).recipients[0].status).to.equal('pending');
  });

  it('after the cooldown a new link is mailed and voids the old one', async () => {
    const requests = (await h.motor.rt.store.readStream(streamName('freeRecipients', acct.accountId))).filter((e) => e.type === 'FreeRecipientRequested');
    const lastRequest = Date.parse((requests[requests.length - 1].data as FreeRecipientRequested).requestedAt);
    await new Promise((r) => setTimeout(r, Math.max(0, lastRequest + 5100 - Date.now())));
    const before = h.mailsTo(friend).length;
    const r = await ask(friend);
    expect(r.body.data).to.deep.equal({ recipient: { email: friend, status: 'pending' } });
    await eventually(async () => h.mailsTo(friend).length > before, 20_000);
    const fresh = await linkTokenFor(friend);
    expect(fresh).to.not.equal(firstToken);
    const old = await confirmForm(firstToken);
    expect(old.status).to.equal(404);
    expect((await list()).recipients[0].status).to.equal('pending');
    firstToken = fresh;
  });

  it('the emailed link confirms once; a used link does not confirm again; asking again answers confirmed without mail', async () => {
    const res = await confirmForm(firstToken);
    expect(res.status).to.equal(200);
    expect(await res.text()).to.include('data-outcome="confirmed"');
    const d = await list();
    expect(d.recipients[0]).to.include({ email: friend, status: 'confirmed' });
    const again = await confirmForm(firstToken);
    expect(again.status).to.equal(409);
    expect(await again.text()).to.include('data-outcome="already_used"');
    const show = await fetch(h.url(`/free-recipients/confirm?token=${firstToken}`));
    expect(show.status).to.equal(409);

    const mails = h.mailsTo(friend).length;
    const r = await ask(friend);
    expect(r.body.data).to.deep.equal({ recipient: { email: friend, status: 'confirmed' } });
    await new Promise((x) => setTimeout(x, 500));
    expect(h.mailsTo(friend).length).to.equal(mails);
    const events = await h.motor.rt.store.readStream(streamName('freeRecipients', acct.accountId));
    expect(events.filter((e) => e.type === 'FreeRecipientConfirmed')).to.have.length(1);
  });

  it('a confirmed address may receive: HTTP and SMTP pass; an unconfirmed one is refused at its RCPT TO (550 5.7.1), the message goes to the others', async () => {
    const ok = await send([friend]);
    expect(ok.status).to.equal(200);
    await eventually(async () => h.mailsTo(friend).some((m) => m.includes('Subject: free plan')), 20_000);
    const from = `app@${acct.domain}`;

    const c = await rawSession(h, acct);
    expect(await c.command(`MAIL FROM:<${from}>`)).to.match(/^250 /);
    const refusal = await c.command('RCPT TO:<stranger@rcpt.test>');
    expect(refusal).to.match(/^550 5\.7\.1 .*stranger@rcpt\.test/);
    expect(await c.command(`RCPT TO:<${friend}>`)).to.match(/^250 /);
    // The account's own address is permitted too.
    expect(await c.command(`RCPT TO:<${acct.email}>`)).to.match(/^250 /);
    expect(await c.command('DATA')).to.match(/^354 /);
    const done = await c.command(`${rfc822({ from, to: friend, subject: 'smtp free rcpt' })}.`);
    c.end();
    expect(done).to.match(/^250 /);
    const id = /queued as ([0-9a-f-]{36})/.exec(done!)![1];
    expect(((await h.motor.rt.store.readStream(streamName('message', id)))[0].data as MessageAccepted).to).to.deep.equal([friend, acct.email]);
    await eventually(async () => h.mailsTo(friend).some((m) => m.includes('Subject: smtp free rcpt')), 20_000);
    expect(h.mailsTo('stranger@rcpt.test').some((m) => m.includes('Subject: smtp free rcpt'))).to.equal(false);
    const refused = await eventually(async () => (await h.motor.rt.store.readStream(streamName('smtpSubmission', acct.motorBlockId)))
      .map((e) => e.data as SmtpSubmissionRefused).find((e) => e.code === 'recipient_not_permitted'));
    expect(refused).to.deep.include({ reply: refusal, envelopeFrom: from, recipientCount: 1 });

    // A real client: every recipient refused is an envelope error, before any DATA.
    const t = transport(h, { user: acct.smtpUsername, pass: acct.smtpPassword });
    const info = await t.sendMail({ from, to: friend, subject: 'smtp free', text: 'x' });
    expect(info.response).to.match(/^250 /);
    const err = await t.sendMail({ from, to: ['stranger@rcpt.test'], subject: 'smtp free', text: 'x' }).then(() => null, (e) => e);
    t.close();
    expect(err?.code).to.equal('EENVELOPE');
    expect(err?.responseCode).to.equal(550);
  });

  it('the limit: pending and confirmed both count; a new address over it is 409 recipient_limit', async () => {
    expect((await ask(`two-${uniq()}@rcpt.test`)).status).to.equal(200);
    expect((await ask(`three-${uniq()}@rcpt.test`)).status).to.equal(200);
    const over = await ask(`four-${uniq()}@rcpt.test`);
    expect([over.status, over.body.code]).to.deep.equal([409, 'recipient_limit']);
    expect(over.body.nextAction).to.match(/DELETE/);
    expect((await list()).usage).to.equal(3);
  });

  it('DELETE: 400 invalid_id, 404 not_found (unknown or another account\'s); removing a confirmed address refuses sends again', async () => {
    const del = (id: string, t = token) => h.del(`${path}/${id}`, bearer(t));
    expect([(await del('nope')).status, (await del('nope')).body.code]).to.deep.equal([400, 'invalid_id']);
    const unknown = await del(newId());
    expect([unknown.status, unknown.body.code]).to.deep.equal([404, 'not_found']);

    const other = await h.bootstrapAccount('free');
    const otherToken = await h.motor.token(other, ['recipients.manage']);
    const mine = (await list()).recipients.find((r: { email: string }) => r.email === friend);
    const foreign = await del(mine.id, otherToken);
    expect([foreign.status, foreign.body.code]).to.deep.equal([404, 'not_found']);

    const ok = await del(mine.id);
    expect(ok.status).to.equal(200);
    expect(ok.body.data).to.deep.equal({ id: mine.id, email: friend, removed: true });
    const d = await list();
    expect(d.recipients.map((r: { email: string }) => r.email)).to.not.include(friend);
    expect(d.usage).to.equal(2);
    const refused = await send([friend]);
    expect([refused.status, refused.body.code]).to.deep.equal([403, 'recipient_not_permitted']);
    expect((await del(mine.id)).status).to.equal(404);
  });

  it('concurrent POSTs and DELETEs on one list: no 5xx (they were 500 internal_error); the list stays consistent', async () => {
    const other = await h.bootstrapAccount('free');
    const t = await h.motor.token(other, ['recipients.manage']);
    const t2 = await h.motor.token(other, ['recipients.manage']);
    if (Date.now() % 60_000 > 50_000) await new Promise((r) => setTimeout(r, 60_000 - (Date.now() % 60_000) + 50));
    const seeded = await Promise.all([1, 2, 3].map((i) => ask(`seed${i}-${uniq()}@rcpt.test`, t)));
    expect(seeded.map((r) => r.status)).to.deep.equal([200, 200, 200]);
    const ids: string[] = (await list(t)).recipients.map((r: { id: string }) => r.id);
    const same = `same-${uniq()}@rcpt.test`;
    const rs = await Promise.all([
      ...ids.map((id) => h.del(`${path}/${id}`, bearer(t2))),
      ...[...ids, ...ids].map((id) => h.del(`${path}/${id}`, bearer(t2))),
      ...Array.from({ length: 6 }, () => ask(same, t)),
      ...Array.from({ length: 2 }, (_, i) => ask(`new${i}-${uniq()}@rcpt.test`, t)),
    ]);
    const seen = rs.map((r) => `${r.status}:${r.body.code ?? 'ok'}`);
    // Each id is deleted once (200); its other DELETEs find it gone (404).
    const deletes = seen.slice(0, 9);
    expect(deletes.filter((r) => r === '200:ok'), seen.join(' ')).to.have.length(3);
    expect(deletes.filter((r) => r !== '200:ok'), seen.join(' ')).to.deep.equal(Array(6).fill('404:not_found'));
    for (const r of seen.slice(9)) expect(r, seen.join(' ')).to.be.oneOf(['200:ok', '409:recipient_limit']);
    // The same address asked six times at once: one entry, every answer the same.
    const sameAnswers = rs.slice(9, 15).filter((r) => r.status === 200).map((r) => JSON.stringify(r.body.data));
    expect(new Set(sameAnswers).size).to.be.at.most(1);
    const d = await list(t);
    expect(d.recipients.filter((r: { email: string }) => r.email === same).length).to.be.at.most(1);
    expect(d.usage).to.equal(d.recipients.length).and.to.be.at.most(3);
    expect(d.recipients.map((r: { id: string }) => r.id)).to.not.include.members(ids);
  });

  it('rate limit: more POSTs per minute than FREE_RECIPIENT_POSTS_PER_MINUTE is 429 rate_limited', async () => {
    const other = await h.bootstrapAccount('free');
    const t = await h.motor.token(other, ['recipients.manage']);
    // The window is a fixed UTC minute: do not start right before it rolls over.
    if (Date.now() % 60_000 > 55_000) await new Promise((r) => setTimeout(r, 60_000 - (Date.now() % 60_000) + 50));
    const statuses: number[] = [];
    let last: Awaited<ReturnType<typeof ask>> | null = null;
    for (let i = 0; i < 21; i++) {
      last = await ask('not-an-address', t);
      statuses.push(last.status);
    }
    expect(statuses.slice(0, 20).every((s) => s === 400)).to.equal(true);
    expect(statuses[20]).to.equal(429);
    expect(last!.body.code).to.equal('rate_limited');
    expect(Number(last!.headers.get('retry-after'))).to.be.greaterThan(0);
  });

  it('502 email_send_failed when the mail cannot be handed to the pipeline; the address is then not on the list', async () => {
    const systemBlock = systemIds('no-reply@motor.test').motorBlockId;
    await h.motor.setLimits(systemBlock, { burst: 1, hourly: 1, daily: 1 });
    const other = await h.bootstrapAccount('free');
    const t = await h.motor.token(other, ['recipients.manage']);
    const email = `unlucky-${uniq()}@rcpt.test`;
    const r = await ask(email, t);
    expect([r.status, r.body.code]).to.deep.equal([502, 'email_send_failed']);
    // The system block's quota passes: asking again later can work.
    expect(r.body.temporary).to.equal(true);
    const d = await list(t);
    expect(d.recipients).to.deep.equal([]);
    expect(d.usage).to.equal(0);
  });
});
