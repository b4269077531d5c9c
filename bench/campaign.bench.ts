/**
 * bench:campaign — how fast a campaign turns a contact list into accepted messages
 * (docs/COMMUNICATIONS.md "How a campaign is sent"), next to a baseline measured in the same run:
 *   baseline  the same number of messages accepted by `sendMessage` one after another, in this
 *             process, on the same block (the /v1/send acceptance path without HTTP: checks,
 *             quota, append), each body the size of a rendered campaign message;
 *   parallel  the same with CAMPAIGN_CONCURRENCY sends in flight, as many as the campaign sender has
 *             (the acceptance path's ceiling at that concurrency);
 *   campaign  `processCampaignPage` run page after page (no queue between pages, so the figure is
 *             the sender's own: render, track, unsubscribe link, suppression check, accept,
 *             checkpoint), from the first page to CampaignSendCompleted.
 * The projector role runs in this process (the contacts and campaigns read models); nothing is
 * delivered (no worker role), so only acceptance is measured.
 *
 * Settings (env or --arg=value):
 *   CAMPAIGN_CONTACTS / --contacts   contacts on the list (default 5,000)
 *   CAMPAIGN_PAGE / --page           contacts per page (default 100, CAMPAIGN_PAGE_SIZE's default)
 */
import { randomUUID } from 'node:crypto';
import { toEventData } from '../domain/events';
import { streamName } from '../domain/eventStore';
import { newId } from '../domain/ids';
import { addContactsBatch } from '../commands/comms/contacts';
import { createContactList } from '../commands/comms/contactLists';
import { createCampaign, loadCampaign, sendCampaign } from '../commands/comms/campaigns';
import { createTemplate } from '../commands/templates/templates';
import { sendMessage } from '../commands/send/sendMessage';
import { setBlockLimits } from '../commands/admin/bootstrap';
import { getBlock } from '../projections/directory/queries';
import { CAMPAIGN_CONCURRENCY, processCampaignPage } from '../workers/campaigns';
import { startRoles } from '../scripts/runtime';
import { fmt, intSetting, machine, onCleanup, runBench, sleep, table } from './lib/common';
import { benchEnv, createFixture } from './lib/fixture';

const CONTACTS = intSetting('CAMPAIGN_CONTACTS', 'contacts', 5000);
const PAGE = Math.max(1, intSetting('CAMPAIGN_PAGE', 'page', 100));

const HTML = `<html><body><h1>Hello {{name}}</h1><p>Our spring collection is here, {{name}}. ${'Lorem ipsum dolor sit amet, consectetur adipiscing elit. '.repeat(12)}</p>
<p><a href="https://shop.example.com/spring?utm_source=mail">Shop now</a> · <a href="https://shop.example.com/account">Your account</a></p>
<p>{{identity_name}} · <a href="{{unsubscribe_url}}">Unsubscribe</a></p></body></html>`;
const TEXT = `Hello {{name}}, our spring collection is here. https://shop.example.com/spring\nUnsubscribe: {{unsubscribe_url}}`;

runBench('bench:campaign', 600 + Math.ceil(CONTACTS / 100) * 10, async () => {
  console.log(`bench:campaign — ${machine()}`);
  console.log(`${fmt(CONTACTS)} contacts, pages of ${PAGE}\n`);
  const f = await createFixture('campaign', benchEnv({ CAMPAIGN_PAGE_SIZE: String(PAGE) }));
  const { rt } = f;
  const started = await startRoles(rt, ['projector']);
  onCleanup('projector role', () => started.stop());
  const tenantId = f.block.accountId;
  const deps = { store: rt.store, db: rt.db, logger: rt.logger, metrics: rt.metrics, clock: rt.clock, directory: rt.directory };

  // A general_purpose block on the bootstrap domain (campaigns refuse transactional blocks).
  const motorBlockId = newId();
  await rt.store.append(streamName('motorBlock', motorBlockId), [toEventData(newId(), {
    type: 'MotorBlockCreated',
    data: {
      motorBlockId, accountId: tenantId, name: 'Newsletter', type: 'general_purpose', domainId: f.block.domainId,
      smtpUsername: `u${newId().replace(/-/g, '').slice(-12)}`, authMethod: 'smtp_password', createdAt: new Date().toISOString(),
    },
  })], { expectedRevision: 'no_stream' });
  await setBlockLimits(rt.store, motorBlockId, { burst: 100_000_000, hourly: 500_000_000, daily: 1_000_000_000 }, new Date());
  while ((await getBlock(rt.db, motorBlockId))?.limits.burst !== 100_000_000) await sleep(20);

  const from = `news@${f.senderDomain}`;
  const template = (await createTemplate(deps, tenantId, 'bench', { name: 'Spring', subject: 'Spring is here, {{name}}', type: 'html', body_html: HTML, body_text: TEXT })).template;
  const list = await createContactList(deps, tenantId, 'bench', { name: 'Everyone' });
  const t0 = performance.now();
  for (let i = 0; i < CONTACTS; i += 1000) {
    const contacts = Array.from({ length: Math.min(1000, CONTACTS - i) }, (_, k) => ({ email: `reader${i + k}@rcpt.example.test`, name: `Reader ${i + k}`, fields: { tier: 'gold' } }));
    const r = await addContactsBatch(deps, tenantId, 'bench', list.id, { contacts });
    if (r.added !== contacts.length) throw new Error(`batch import added ${r.added} of ${contacts.length}`);
  }
  const importSeconds = (performance.now() - t0) / 1000;
  console.log(`imported ${fmt(CONTACTS)} contacts in ${fmt(importSeconds, 1)} s (${fmt(CONTACTS / importSeconds)} contacts/s, batches of 1,000)`);

  // ---------------------------------------------------------------- baseline
  const sample = {
    from, fromName: 'Acme News', to: ['sample@rcpt.example.test'], subject: 'Spring is here, Reader 1',
    html: HTML.replace(/\{\{\w+\}\}/g, 'https://auth.example.test/comm-api/u/' + 'x'.repeat(108)), text: TEXT,
    headers: { 'List-Unsubscribe': `<https://auth.example.test/comm-api/u/${'x'.repeat(108)}>`, 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' },
    metadata: { campaign_id: randomUUID() },
  };
  const sendDeps = { store: rt.store, directory: rt.directory, quota: rt.quota, config: rt.config };
  const b0 = performance.now();
  for (let i = 0; i < CONTACTS; i++) {
    await sendMessage(sendDeps, { motorBlockId, body: { ...sample, to: [`base${i}@rcpt.example.test`] }, idempotencyKey: null, source: 'http', now: new Date() });
  }
  const baselineSeconds = (performance.now() - b0) / 1000;
  // The same path with as many sends in flight as the campaign sender has (CAMPAIGN_CONCURRENCY).
  const p0 = performance.now();
  let nextParallel = 0;
  await Promise.all(Array.from({ length: CAMPAIGN_CONCURRENCY }, async () => {
    while (nextParallel < CONTACTS) {
      const i = nextParallel++;
      await sendMessage(sendDeps, { motorBlockId, body: { ...sample, to: [`par${i}@rcpt.example.test`] }, idempotencyKey: null, source: 'http', now: new Date() });
    }
  }));
  const parallelSeconds = (performance.now() - p0) / 1000;

  // ---------------------------------------------------------------- campaign
  const campaign = await createCampaign(deps, tenantId, 'bench', { name: 'Spring', template_id: template.id, list_id: list.id, motor_block_id: motorBlockId, from, from_name: 'Acme News' });
  await sendCampaign(deps, tenantId, 'bench', campaign.id);
  const senderDeps = {
    store: rt.store, db: rt.db, send: sendDeps, clock: rt.clock, logger: rt.logger,
    baseUrl: rt.config.authPublicUrl, tokenSecret: rt.config.tokenSecret, pageSize: PAGE,
  };
  const c0 = performance.now();
  let pages = 0;
  for (;;) {
    const { revision } = await loadCampaign(rt.store, campaign.id);
    const result = await processCampaignPage(senderDeps, { campaignId: campaign.id, revision: String(revision) });
    pages++;
    if (result === 'completed') break;
    if (result !== 'progressed') throw new Error(`page ${pages}: ${result}`);
  }
  const campaignSeconds = (performance.now() - c0) / 1000;
  const { state } = await loadCampaign(rt.store, campaign.id);
  if (state.counts.accepted !== CONTACTS) throw new Error(`campaign accepted ${state.counts.accepted} of ${CONTACTS}`);
  const accepted = await f.countEvents('MessageAccepted');
  if (accepted !== 3 * CONTACTS) throw new Error(`${accepted} MessageAccepted in the store, expected ${3 * CONTACTS}`);

  const baseRate = CONTACTS / baselineSeconds;
  const campRate = CONTACTS / campaignSeconds;
  console.log('\n' + table(['', 'messages', 'seconds', 'messages/s', 'ratio'], [
    ['baseline: sendMessage one after another', fmt(CONTACTS), fmt(baselineSeconds, 1), fmt(baseRate), '1.00'],
    [`sendMessage, ${CAMPAIGN_CONCURRENCY} in flight`, fmt(CONTACTS), fmt(parallelSeconds, 1), fmt(CONTACTS / parallelSeconds), fmt(CONTACTS / parallelSeconds / baseRate, 2)],
    [`campaign: ${pages} pages of ${PAGE}`, fmt(CONTACTS), fmt(campaignSeconds, 1), fmt(campRate), fmt(campRate / baseRate, 2)],
  ]));
  console.log(`\nevery contact accepted once (${fmt(state.counts.accepted)}), ${fmt(accepted)} MessageAccepted in the store in all`);
});
