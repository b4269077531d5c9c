import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import type { Response } from 'express';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { MESSAGES_SCHEMA } from '../../projections/messages/queries';
import { startDnsServer, type TestDnsServer } from '../support/dnsServer';
import { startSmtpSink, type SmtpSink } from '../support/smtpSink';
import { eventually, getJson, postJson, startTestMotor, type TestMotor } from '../support/motor';
import { openSseStream } from '../support/sse';

/**
 * The live event stream (SPEC "Event stream", docs/EVENTS.md): real sends, delivered to an SMTP
 * sink on loopback, seen as they happen over Server-Sent Events.
 */
describe('event stream (e2e)', function () {
  this.timeout(60_000);
  let dns: TestDnsServer;
  let mx: SmtpSink;
  let motor: TestMotor;
  let block: BootstrapResult;
  let senderDomain: string;

  before(async () => {
    dns = await startDnsServer({ 'rcpt.test': { MX: [{ exchange: 'mx.rcpt.test', priority: 10 }] }, 'mx.rcpt.test': { A: ['127.0.0.1'] } });
    mx = await startSmtpSink({ rcpt: () => 250 });
    motor = await startTestMotor({ env: { DNS_SERVERS: dns.address, MX_PORT: String(mx.port), EVENT_STREAM_KEEPALIVE_SECONDS: '1' } });
    block = await motor.bootstrap({ trustDns: true });
    senderDomain = block.dnsRecords.find((r) => r.purpose === 'spf')!.name;
  });
  after(async () => {
    await motor?.close();
    await mx?.close();
    await dns?.close();
  });

  const streamUrl = (b: BootstrapResult, query = '') => `${motor.baseUrl}/api/public/v1/motor-blocks/${b.motorBlockId}/events/stream${query}`;
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const send = async (b: BootstrapResult, domain: string, to: string | string[]) => {
    const r = await postJson(`${motor.baseUrl}/v1/send`, { from: `app@${domain}`, to, subject: 'Hi', text: 'Hello' }, { 'X-Api-Key': b.apiKey });
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    return r.body.data.id as string;
  };

  it('says ready, then each recipient outcome of the block\'s messages as it happens, masked, with the log position as id', async () => {
    const token = await motor.token(block, ['logs.read']);
    const s = await openSseStream(streamUrl(block), bearer(token));
    expect(s.res.status).to.equal(200);
    expect(s.res.headers.get('content-type')).to.equal('text/event-stream; charset=utf-8');
    await eventually(async () => s.events.length > 0);
    expect(s.events[0].event).to.equal('ready');
    expect(s.events[0].data).to.include({ motorBlockId: block.motorBlockId, piiMasked: true });

    const id = await send(block, senderDomain, 'first.user@rcpt.test');
    const mine = await eventually(async () => {
      const list = s.events.filter((e) => e.event === 'message' && e.data.messageId === id);
      return list.some((e) => e.data.status === 'delivered') ? list : null;
    }, 30_000);
    expect(mine.map((e) => e.data.status)).to.deep.equal(['queued', 'processed', 'delivered']);
    for (const e of mine) expect(e.data.recipient).to.equal('f***@r***.test');
    expect(mine[2].data).to.include({ smtpCode: '250', attempt: 1 });
    expect(mine.every((e) => typeof e.id === 'string' && e.id.length > 0)).to.equal(true);
    expect(new Set(mine.map((e) => e.id)).size).to.equal(3);
    await eventually(async () => s.events.some((e) => e.event === 'keepalive'), 5000);
    s.close();
  });

  it('shows only its own block, and recipients in clear with includePII and logs.pii', async () => {
    const other = await motor.bootstrap({ email: 'other@example.test' });
    const otherDomain = other.dnsRecords.find((r) => r.purpose === 'spf')!.name;
    const s = await openSseStream(streamUrl(block, '?includePII=true'), bearer(await motor.token(block, ['logs.read', 'logs.pii'])));
    expect(s.res.status).to.equal(200);
    const foreign = await send(other, otherDomain, 'someone@rcpt.test');
    const own = await send(block, senderDomain, 'second.user@rcpt.test');
    const got = await eventually(async () => s.events.find((e) => e.data?.messageId === own && e.data.status === 'delivered'), 30_000);
    expect(got.data.recipient).to.equal('second.user@rcpt.test');
    expect(s.events.filter((e) => e.data?.messageId === foreign)).to.have.length(0);
    s.close();
  });

  it('refuses what the spec refuses: no token 401, another scope or block 403, includePII without logs.pii 403', async () => {
    expect((await getJson(streamUrl(block))).status).to.equal(401);
    expect((await getJson(streamUrl(block), bearer(await motor.token(block, ['webhooks.read'])))).status).to.equal(403);
    const other = await motor.bootstrap({ email: 'third@example.test' });
    expect((await getJson(streamUrl(other), bearer(await motor.token(block, ['logs.read'])))).status).to.equal(403);
    const pii = await getJson(streamUrl(block, '?includePII=true'), bearer(await motor.token(block, ['logs.read'])));
    expect(pii.status).to.equal(403);
  });

  it('takes the token as ?token= or ?access_token= too (EventSource sends no headers); only on this route', async () => {
    const token = await motor.token(block, ['logs.read']);
    for (const name of ['token', 'access_token']) {
      const s = await openSseStream(streamUrl(block, `?${name}=${token}`), {});
      expect(s.res.status, name).to.equal(200);
      await eventually(async () => s.events[0]?.event === 'ready');
      s.close();
    }
    expect((await getJson(streamUrl(block, '?token=not-a-token'))).status).to.equal(401);
    const logs = await getJson(`${motor.baseUrl}/api/public/v1/motor-blocks/${block.motorBlockId}/logs?token=${token}`);
    expect(logs.status, 'the logs route takes the header only').to.equal(401);
  });

  it('holds at most 3 streams per token (429 stream_limit); a closed one frees its place', async () => {
    const token = await motor.token(block, ['logs.read']);
    const open = [];
    for (let i = 0; i < 3; i++) {
      const s = await openSseStream(streamUrl(block), bearer(token));
      expect(s.res.status).to.equal(200);
      open.push(s);
    }
    const fourth = await getJson(streamUrl(block), bearer(token));
    expect(fourth.status).to.equal(429);
    expect(fourth.body.code).to.equal('stream_limit');
    const another = await openSseStream(streamUrl(block), bearer(await motor.token(block, ['logs.read'])));
    expect(another.res.status, 'another token has its own three').to.equal(200);
    another.close();
    open[0].close();
    const again = await eventually(async () => {
      const s = await openSseStream(streamUrl(block), bearer(token));
      if (s.res.status === 200) return s;
      return null;
    }, 5000);
    for (const s of [...open.slice(1), again]) s.close();
  });

  it('with Redis unavailable, still holds at most 3 streams per token in the process', async () => {
    const { EventStreams } = await import('../../read-api/stream/eventStreams.js');
    const { Redis } = await import('ioredis');
    const rt = motor.rt;
    // Nothing listens on port 1: every Redis command fails at once.
    const deadRedis = new Redis({ host: '127.0.0.1', port: 1, lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
    deadRedis.on('error', () => undefined);
    const streams = new EventStreams(rt.db, rt.store, deadRedis, rt.logger, 1);
    const server = createServer((req, res) => {
      const tokenId = new URL(req.url ?? '/', 'http://x').searchParams.get('token') ?? 'none';
      streams.serve(res as unknown as Response, { motorBlockId: block.motorBlockId, tokenId, endsAt: new Date(Date.now() + 20_000), unmasked: false })
        .catch((err: { status?: number; code?: string }) => { res.writeHead(err.status ?? 500, { 'content-type': 'application/json' }).end(JSON.stringify({ code: err.code })); });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const url = (token: string) => `http://127.0.0.1:${(server.address() as AddressInfo).port}/?token=${token}`;
    try {
      const open: Array<Awaited<ReturnType<typeof openSseStream>>> = [];
      for (let i = 0; i < 3; i++) open.push(await openSseStream(url('a'), {}));
      expect(open.map((s) => s.res.status)).to.deep.equal([200, 200, 200]);
      await eventually(async () => open.every((s) => s.events.some((e) => e.event === 'ready')) ? true : null, 5000);
      const fourth = await getJson(url('a'), {});
      expect(fourth.status).to.equal(429);
      expect(fourth.body.code).to.equal('stream_limit');
      const other = await openSseStream(url('b'), {});
      expect(other.res.status, 'another token has its own three').to.equal(200);
      other.close();
      // Past a keepalive (1 s here) the held streams keep their places rather than losing them.
      await new Promise((r) => setTimeout(r, 1500));
      expect((await getJson(url('a'), {})).status).to.equal(429);
      open[0].close();
      const again = await eventually(async () => {
        const s = await openSseStream(url('a'), {});
        return s.res.status === 200 ? s : null;
      }, 5000);
      for (const s of [...open.slice(1), again]) s.close();
    } finally {
      streams.closeAll();
      server.close();
      deadRedis.disconnect();
    }
  });

  const delivered = async (b: BootstrapResult, id: string) => {
    const auth = bearer(await motor.token(b, ['logs.read']));
    return eventually(async () => {
      const r = await getJson(`${motor.baseUrl}/api/public/v1/messages/${id}`, auth);
      return r.body?.data?.currentOutcome === 'delivered' ? true : null;
    }, 30_000);
  };

  it('resumes after Last-Event-ID: replays what it missed, then goes live, without a gap or a repeat', async () => {
    const first = await openSseStream(streamUrl(block), bearer(await motor.token(block, ['logs.read'])));
    const m1 = await send(block, senderDomain, 'r1@rcpt.test');
    const m1Events = await eventually(async () => {
      const list = first.events.filter((e) => e.data?.messageId === m1);
      return list.length === 3 ? list : null;
    }, 30_000);
    first.close();
    const lastSeen = m1Events[0].id!; // only the 'queued' one was "seen": processed and delivered are replayed

    const other = await motor.bootstrap({ email: 'resume-other@example.test' });
    const foreign = await send(other, other.dnsRecords.find((r) => r.purpose === 'spf')!.name, 'x@rcpt.test');
    const m2 = await send(block, senderDomain, 'r2@rcpt.test');
    await delivered(block, m2);
    await delivered(other, foreign);

    const token = await motor.token(block, ['logs.read']);
    const s = await openSseStream(streamUrl(block), { ...bearer(token), 'last-event-id': lastSeen });
    expect(s.res.status).to.equal(200);
    await eventually(async () => s.events.filter((e) => e.data?.messageId === m2).length === 3 ? true : null, 10_000);
    expect(s.events[0]).to.deep.include({ event: 'ready' });
    expect(s.events[0].data.resumedAfter).to.equal(lastSeen);
    const m3 = await send(block, senderDomain, 'r3@rcpt.test');
    await eventually(async () => s.events.some((e) => e.data?.messageId === m3 && e.data.status === 'delivered') ? true : null, 30_000);
    await new Promise((r) => setTimeout(r, 300));
    s.close();

    const messages = s.events.filter((e) => e.event === 'message');
    const seen = messages.map((e) => `${e.data.messageId}:${e.data.status}`);
    expect(seen.filter((x) => x.startsWith(m1))).to.deep.equal([`${m1}:processed`, `${m1}:delivered`]);
    expect(seen.filter((x) => x.startsWith(m2))).to.deep.equal([`${m2}:queued`, `${m2}:processed`, `${m2}:delivered`]);
    expect(seen.filter((x) => x.startsWith(m3))).to.deep.equal([`${m3}:queued`, `${m3}:processed`, `${m3}:delivered`]);
    expect(messages.some((e) => e.data.messageId === foreign), 'another block\'s message').to.equal(false);
    expect(new Set(messages.map((e) => e.id)).size, 'no event twice').to.equal(messages.length);
    for (let i = 1; i < messages.length; i++) expect(motor.rt.store.comparePositions(messages[i - 1].id!, messages[i].id!), 'log order').to.be.below(0);
    expect(s.events.some((e) => e.event === 'gap')).to.equal(false);

    // The same with ?lastEventId= (an EventSource opened anew with a fresh token cannot set the header).
    const q = await openSseStream(streamUrl(block, `?token=${await motor.token(block, ['logs.read'])}&lastEventId=${encodeURIComponent(lastSeen)}`), {});
    await eventually(async () => q.events.filter((e) => e.data?.messageId === m3).length === 3 ? true : null, 10_000);
    expect(q.events.filter((e) => e.event === 'message').map((e) => e.id)).to.deep.equal(messages.map((e) => e.id));
    q.close();
  });

  it('a message to three recipients: resuming after its first queued event gives the other two, then the rest, once each', async () => {
    // The three queued events come from one log entry (one MessageAccepted): each has its own id,
    // and resuming after one of them gives the entry's later ones (docs/EVENTS.md "Event ids").
    const first = await openSseStream(streamUrl(block), bearer(await motor.token(block, ['logs.read'])));
    const m = await send(block, senderDomain, ['alpha@rcpt.test', 'bravo@rcpt.test', 'charlie@rcpt.test']);
    const queued = await eventually(async () => {
      const list = first.events.filter((e) => e.data?.messageId === m && e.data.status === 'queued');
      return list.length === 3 ? list : null;
    }, 30_000);
    first.close();
    expect(queued.map((e) => e.data.recipient)).to.deep.equal(['a***@r***.test', 'b***@r***.test', 'c***@r***.test']);
    expect(new Set(queued.map((e) => e.id)).size, 'one id per event').to.equal(3);
    const lastSeen = queued[0].id!; // the client read the first queued event only, then dropped

    const s = await openSseStream(streamUrl(block), { ...bearer(await motor.token(block, ['logs.read'])), 'last-event-id': lastSeen });
    expect(s.res.status).to.equal(200);
    const ofM = () => s.events.filter((e) => e.event === 'message' && e.data.messageId === m);
    await eventually(async () => ofM().filter((e) => e.data.status === 'delivered').length === 3 ? true : null, 30_000);
    expect(s.events[0].data.resumedAfter).to.equal(lastSeen);
    const live = await send(block, senderDomain, 'delta@rcpt.test');
    await eventually(async () => s.events.some((e) => e.data?.messageId === live && e.data.status === 'delivered') ? true : null, 30_000);
    await new Promise((r) => setTimeout(r, 300));
    s.close();

    const mine = ofM();
    expect(mine.filter((e) => e.data.status === 'queued').map((e) => [e.id, e.data.recipient]), 'the other two queued events')
      .to.deep.equal(queued.slice(1).map((e) => [e.id, e.data.recipient]));
    for (const status of ['processed', 'delivered']) {
      expect(mine.filter((e) => e.data.status === status).map((e) => e.data.recipient).sort(), status)
        .to.deep.equal(['a***@r***.test', 'b***@r***.test', 'c***@r***.test']);
    }
    expect(mine.length, 'nothing of m twice').to.equal(8);
    expect(s.events.filter((e) => e.data?.messageId === live).map((e) => e.data.status)).to.deep.equal(['queued', 'processed', 'delivered']);
    const messages = s.events.filter((e) => e.event === 'message');
    expect(new Set(messages.map((e) => e.id)).size, 'no id twice').to.equal(messages.length);
    expect(s.events.some((e) => e.event === 'gap')).to.equal(false);

    // Resuming after the second queued event gives the third; after the last, none of them.
    const q = await openSseStream(streamUrl(block, `?token=${await motor.token(block, ['logs.read'])}&lastEventId=${encodeURIComponent(queued[1].id!)}`), {});
    await eventually(async () => q.events.some((e) => e.data?.messageId === live && e.data.status === 'delivered') ? true : null, 10_000);
    q.close();
    expect(q.events.filter((e) => e.data?.messageId === m && e.data.status === 'queued').map((e) => e.id)).to.deep.equal([queued[2].id]);
    expect(q.events.filter((e) => e.event === 'message').map((e) => e.id)).to.deep.equal(messages.filter((e) => e.id !== queued[1].id).map((e) => e.id));

    // An id of the former shape (the bare log position, as every id was) resumes after the whole entry, as it did.
    const position = queued[0].id!.split('/')[0];
    const old = await openSseStream(streamUrl(block), { ...bearer(await motor.token(block, ['logs.read'])), 'last-event-id': position });
    await eventually(async () => old.events.some((e) => e.data?.messageId === live && e.data.status === 'delivered') ? true : null, 10_000);
    old.close();
    expect(old.events[0].data.resumedAfter).to.equal(position);
    expect(old.events.filter((e) => e.event === 'message').map((e) => e.id)).to.deep.equal(messages.filter((e) => e.data.status !== 'queued' || e.data.messageId !== m).map((e) => e.id));
  });

  it('refuses a Last-Event-ID that is not an event id (400 invalid_last_event_id)', async () => {
    const token = await motor.token(block, ['logs.read']);
    const uuid = '0194c3d2-7b1e-7000-8000-000000000000';
    // The last four: numbers the log's position columns cannot hold (the stream used to open, then say `gap` too_far_behind).
    for (const bad of ['nope', '1:2:3', '-1:5', `1:2/${uuid}`, `1:2/${uuid}/x`, `1:2/${uuid}/1/2`, '1:2/not-a-message/1', `nope/${uuid}/1`, `1:2//${uuid}/1`,
      '1:9223372036854775808', '18446744073709551616:1', `1:9223372036854775808/${uuid}/0`, '99999999999999999999:99999999999999999999']) {
      const r = await getJson(streamUrl(block), { ...bearer(token), 'last-event-id': bad });
      expect([r.status, r.body.code], bad).to.deep.equal([400, 'invalid_last_event_id']);
    }
  });

  it('a resumed stream too far behind says gap, then goes live', async () => {
    const { EventStreams } = await import('../../read-api/stream/eventStreams.js');
    const rt = motor.rt;
    const streams = new EventStreams(rt.db, rt.store, rt.redis, rt.logger, 1, { maxCatchUp: 2 });
    const before = await rt.store.readAll({ after: null, maxCount: 1 });
    const m = await send(block, senderDomain, 'gap@rcpt.test');
    await delivered(block, m);
    const server = createServer((_req, res) => {
      void streams.serve(res as unknown as Response, { motorBlockId: block.motorBlockId, tokenId: 'gap-test', endsAt: new Date(Date.now() + 20_000), unmasked: false, resumeAfter: before[0].position });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const s = await openSseStream(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`, {});
    const gap = await eventually(async () => s.events.find((e) => e.event === 'gap'), 10_000);
    expect(gap.data).to.include({ reason: 'too_far_behind' });
    // The catch-up before the gap (maxCatchUp); live events may already follow it.
    expect(s.events.slice(0, s.events.indexOf(gap)).filter((e) => e.event === 'message')).to.have.length(2);
    const live = await send(block, senderDomain, 'after-gap@rcpt.test');
    await eventually(async () => s.events.some((e) => e.data?.messageId === live && e.data.status === 'delivered') ? true : null, 30_000);
    streams.closeAll();
    await s.closed;
    server.close();
  });

  it('a resumed stream that reads the log for too long (a quiet block far behind) says gap, gives its replay place back, goes live', async () => {
    const { EventStreams } = await import('../../read-api/stream/eventStreams.js');
    const rt = motor.rt;
    const from = (await rt.store.readAll({ after: null, maxCount: 1 }))[0].position;
    // The replay's read of the log as a very long log of other blocks' entries: batches without an
    // event of this block, never at the head. The live feed (which reads after another position) is the real one.
    let replaying = 0;
    const store = Object.create(rt.store, {
      subscribeToAll: {
        value: (o: Parameters<typeof rt.store.subscribeToAll>[0]) => {
          if (o.after !== from) return rt.store.subscribeToAll(o);
          replaying += 1;
          return (async function* () {
            try {
              while (!o.signal.aborted) {
                await new Promise((r) => setTimeout(r, 20));
                yield { events: [], position: from, more: true };
              }
            } finally {
              replaying -= 1;
            }
          })();
        },
      },
    });
    const streams = new EventStreams(rt.db, store, rt.redis, rt.logger, 1, { maxCatchUpMs: 300, maxReplays: 1 });
    const server = createServer((_req, res) => {
      void streams.serve(res as unknown as Response, { motorBlockId: block.motorBlockId, tokenId: 'slow-scan-test', endsAt: new Date(Date.now() + 20_000), unmasked: false, resumeAfter: from });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const started = Date.now();
    const s = await openSseStream(url, {});
    const gap = await eventually(async () => s.events.find((e) => e.event === 'gap'), 10_000);
    expect(gap.data).to.include({ after: from, reason: 'too_far_behind' });
    expect(Date.now() - started, 'the replay read for about maxCatchUpMs').to.be.below(5000);
    await eventually(async () => (replaying === 0 ? true : null), 5000);
    // Its place is free again: a second resume gets one (and its gap) too.
    const second = await openSseStream(url, {});
    await eventually(async () => second.events.find((e) => e.event === 'gap'), 10_000);
    const live = await send(block, senderDomain, 'after-slow-scan@rcpt.test');
    await eventually(async () => s.events.some((e) => e.data?.messageId === live && e.data.status === 'delivered') ? true : null, 30_000);
    s.close();
    second.close();
    streams.closeAll();
    server.close();
  });

  it('replays take turns past the per-process limit, and each still gets everything', async () => {
    const { EventStreams } = await import('../../read-api/stream/eventStreams.js');
    const rt = motor.rt;
    const log = await rt.store.readAll({ after: null, maxCount: 100_000 });
    const from = log[log.length - 1].position;
    const sent = await send(block, senderDomain, 'turns@rcpt.test');
    await delivered(block, sent);
    // The live feed subscribes after the messages projection's checkpoint; GET /messages reads the
    // message's stream before it is projected, so wait for the projection to pass `from`, or the
    // feed's own subscription would start at `from` and be counted as a replay.
    await eventually(async () => {
      const row = await rt.db.withSchema(MESSAGES_SCHEMA).table('projection_checkpoint').where({ id: 1 }).first('position') as { position: string | null } | undefined;
      return row?.position != null && rt.store.comparePositions(row.position, from) > 0 ? true : null;
    }, 10_000);
    // The store as the streams see it, counting the replays reading at once (the feed reads after `from`).
    let reading = 0;
    let most = 0;
    const store = Object.create(rt.store, {
      subscribeToAll: {
        value: (o: Parameters<typeof rt.store.subscribeToAll>[0]) => {
          if (o.after === from) {
            reading += 1;
            most = Math.max(most, reading);
            o.signal.addEventListener('abort', () => { reading -= 1; }, { once: true });
          }
          return rt.store.subscribeToAll(o);
        },
      },
    });
    const streams = new EventStreams(rt.db, store, rt.redis, rt.logger, 1, { maxReplays: 1 });
    const server = createServer((_req, res) => {
      void streams.serve(res as unknown as Response, { motorBlockId: block.motorBlockId, tokenId: 'turns-test', endsAt: new Date(Date.now() + 20_000), unmasked: false, resumeAfter: from });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const clients = await Promise.all([1, 2, 3].map(() => openSseStream(url, {})));
    const mine = (c: typeof clients[number]) => c.events.filter((e) => e.event === 'message').map((e) => e.id);
    await eventually(async () => clients.every((c) => mine(c).length >= 3) ? true : null, 10_000);
    await new Promise((r) => setTimeout(r, 500));
    const statuses = clients[0].events.filter((e) => e.data?.messageId === sent).map((e) => e.data.status);
    expect(statuses).to.deep.equal(['queued', 'processed', 'delivered']);
    expect(most, 'replays reading at once').to.equal(1);
    for (const c of clients) expect(mine(c)).to.deep.equal(mine(clients[0]));
    for (const c of clients) c.close();
    streams.closeAll();
    server.close();
  });

  it('a client gone during the replay leaves no listener behind', async () => {
    const { EventStreams } = await import('../../read-api/stream/eventStreams.js');
    const rt = motor.rt;
    const streams = new EventStreams(rt.db, rt.store, rt.redis, rt.logger, 1);
    const feed = (streams as unknown as { feed: { listeners: Map<string, unknown>; abort: unknown } }).feed;
    const head = await delivered(block, await send(block, senderDomain, 'head@rcpt.test')).then(async () => {
      const log = await rt.store.readAll({ after: null, maxCount: 100_000 });
      return log[log.length - 1].position;
    });
    const server = createServer((_req, res) => {
      void streams.serve(res as unknown as Response, { motorBlockId: block.motorBlockId, tokenId: 'gone-test', endsAt: new Date(Date.now() + 20_000), unmasked: false, resumeAfter: head });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    // At the head of the log the replay waits a moment for more before it goes live: the client leaves then.
    const s = await openSseStream(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`, {});
    await eventually(async () => s.events.some((e) => e.event === 'ready'), 5000);
    s.close();
    await new Promise((r) => setTimeout(r, 1000));
    expect(feed.listeners.size, 'listeners left').to.equal(0);
    expect(feed.abort, 'the feed stopped').to.equal(null);
    streams.closeAll();
    server.close();
  });

  it('ends the stream when the token expires and when the process shuts down (after which none opens)', async () => {
    // The token's expiry: serve() on a bare HTTP server with endsAt half a second away.
    const server = createServer((_req, res) => {
      void motor.rt.http.streams.serve(res as unknown as Response, { motorBlockId: block.motorBlockId, tokenId: 'expiry-test', endsAt: new Date(Date.now() + 500), unmasked: false });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const started = Date.now();
    const s = await openSseStream(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`, {});
    await s.closed;
    expect(Date.now() - started).to.be.within(300, 3000);
    expect(s.events[0].event).to.equal('ready');
    server.close();

    const live = await openSseStream(streamUrl(block), bearer(await motor.token(block, ['logs.read'])));
    await eventually(async () => live.events.length > 0);
    motor.rt.http.streams.closeAll();
    await live.closed;
    const late = await getJson(streamUrl(block), bearer(await motor.token(block, ['logs.read'])));
    expect([late.status, late.body.code]).to.deep.equal([503, 'shutting_down']);
  });
});
