import { expect } from 'chai';
import type { DomainEvent } from '../../domain/events';
import {
  disableIfFailing, evolveEndpoint, previousSecretAt, previousSecretWindow, rotateSecret, webhookUrl, type EndpointState,
} from '../../domain/webhooks/webhooks';

const codeOf = (f: () => unknown): string | null => {
  try {
    f();
    return null;
  } catch (e) {
    return (e as { code?: string }).code ?? String(e);
  }
};

describe('webhook endpoint URL (unit)', () => {
  it('refuses a fragment, an empty one (a bare "#") included', () => {
    // WHATWG URL gives an empty fragment no `hash`: "https://x.test/a#" passed and was stored as such.
    for (const url of ['https://x.test/a#frag', 'https://x.test/a#', 'https://x.test/#', 'http://x.test#', 'https://x.test/a?b=c#']) {
      expect(codeOf(() => webhookUrl(url)), url).to.equal('invalid_webhook_url');
    }
  });

  it('takes an http(s) URL without credentials or fragment, as the URL parser writes it', () => {
    expect(webhookUrl('https://x.test/hook?a=%23')).to.equal('https://x.test/hook?a=%23');
    expect(webhookUrl(' HTTP://X.test ')).to.equal('http://x.test/');
  });
});

describe('webhook endpoint: rotation and the failing pause (unit)', () => {
  const webhookId = '0194b3c0-0000-7000-8000-00000000aaaa';
  const created = { type: 'WebhookCreated', data: { webhookId, motorBlockId: 'b', accountId: 'a', url: 'https://x.test/', events: ['message.delivered'], secretKeyId: 'k1', createdAt: '2026-11-01T00:00:00.000Z' } } as DomainEvent;
  const given = (...events: DomainEvent[]): EndpointState => events.reduce<EndpointState | null>(evolveEndpoint, null)!;
  const day = (d: number) => new Date(Date.parse('2026-11-01T00:00:00.000Z') + d * 86_400_000);
  const failing = (state: EndpointState, over: Partial<Parameters<typeof disableIfFailing>[1]> = {}) =>
    disableIfFailing(state, { webhookId, deliveryId: 'd', event: 'message.delivered', lastSuccessAt: null, disableAfterDays: 3, now: day(3), ...over });

  it('a rotation makes the current secret the previous one for its window; a zero window drops it; the next rotation replaces it', () => {
    const r1 = rotateSecret(given(created), { webhookId, secretKeyId: 'k2', windowSeconds: 60, now: day(1) });
    expect(r1.data).to.deep.equal({ webhookId, motorBlockId: 'b', secretKeyId: 'k2', previousSecretKeyId: 'k1', previousValidUntil: '2026-11-02T00:01:00.000Z', rotatedAt: day(1).toISOString() });
    const s1 = given(created, r1);
    expect([s1.secretKeyId, previousSecretAt(s1, day(1)), previousSecretAt(s1, new Date(day(1).getTime() + 60_000))]).to.deep.equal(['k2', 'k1', null]);
    const s2 = given(created, r1, rotateSecret(s1, { webhookId, secretKeyId: 'k3', windowSeconds: 60, now: day(1) }));
    expect([s2.secretKeyId, previousSecretAt(s2, day(1))]).to.deep.equal(['k3', 'k2']);
    const s3 = given(created, r1, rotateSecret(s1, { webhookId, secretKeyId: 'k3', windowSeconds: 0, now: day(1) }));
    expect([s3.secretKeyId, s3.previousSecretKeyId, previousSecretAt(s3, day(1))]).to.deep.equal(['k3', null, null]);
  });

  it('previousSecretValidForSeconds: 0 to 604800 whole seconds, default 86400', () => {
    expect([previousSecretWindow(undefined), previousSecretWindow(0), previousSecretWindow(604800)]).to.deep.equal([86400, 0, 604800]);
    for (const v of [-1, 604801, 1.5, '60', null, true]) expect(codeOf(() => previousSecretWindow(v)), String(v)).to.equal('validation_error');
  });

  it('a final failure pauses after the threshold since creation or the last success, never for a test, a paused endpoint or a 0 setting', () => {
    expect(failing(given(created))?.data).to.deep.equal({ webhookId, motorBlockId: 'b', reason: 'failing', since: day(0).toISOString(), deliveryId: 'd', disabledAt: day(3).toISOString() });
    expect(failing(given(created), { now: new Date(day(3).getTime() - 1) })).to.equal(null);
    expect(failing(given(created), { lastSuccessAt: day(1) })).to.equal(null);
    expect(failing(given(created), { lastSuccessAt: day(1), now: day(4) })?.data.since).to.equal(day(1).toISOString());
    expect(failing(given(created), { event: 'webhook.test', now: day(30) })).to.equal(null);
    expect(failing(given(created), { disableAfterDays: 0, now: day(30) })).to.equal(null);
    const paused = { type: 'WebhookUpdated', data: { webhookId, motorBlockId: 'b', url: 'https://x.test/', events: ['message.delivered'], enabled: false, updatedAt: day(1).toISOString() } } as DomainEvent;
    expect(failing(given(created, paused), { now: day(30) })).to.equal(null);
  });

  it('paused for failing, the state says why; resuming clears it and restarts the clock', () => {
    const disabled = failing(given(created))!;
    const s = given(created, disabled);
    expect(s).to.include({ enabled: false, disabledReason: 'failing', failingSince: day(0).toISOString() });
    const renamed = { type: 'WebhookUpdated', data: { webhookId, motorBlockId: 'b', url: 'https://y.test/', events: ['message.delivered'], enabled: false, updatedAt: day(4).toISOString() } } as DomainEvent;
    expect(given(created, disabled, renamed), 'a change that keeps it paused keeps the reason').to.include({ enabled: false, disabledReason: 'failing' });
    const resumed = { type: 'WebhookUpdated', data: { webhookId, motorBlockId: 'b', url: 'https://x.test/', events: ['message.delivered'], enabled: true, updatedAt: day(5).toISOString() } } as DomainEvent;
    const r = given(created, disabled, resumed);
    expect(r).to.include({ enabled: true, disabledReason: null, failingSince: null, clockStartsAt: day(5).toISOString() });
    expect(failing(r, { now: day(7) })).to.equal(null);
    expect(failing(r, { now: day(8) })?.data.since).to.equal(day(5).toISOString());
  });
});
