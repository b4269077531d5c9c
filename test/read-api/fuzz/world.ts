import { randomUUID } from 'node:crypto';
import { SCOPES } from '../../../domain/credentials/scopes';
import { getBlock } from '../../../projections/directory/queries';
import { eventually, getJson, postJson } from '../../support/motor';
import { createBlockFor } from '../../auth/fixtures';
import { startAuthHarness, type AuthHarness } from '../../auth/harness';

/**
 * One Motor and one signed-up account holding a resource of every kind a path names (a block, a
 * message, keys, a webhook, a list with a contact, a template, a campaign, a suppression, a free
 * recipient, an export), with a credential of each kind, so that a generated request gets past
 * authentication and the lookup of its ids, and what it is judged on is its input.
 */
export interface World {
  h: AuthHarness;
  accountId: string;
  email: string;
  /** Block A1: the credentials' block (sends, reads, webhooks). */
  block: string;
  /** Block A2: the one the account block-lifecycle routes rename, deactivate and delete. */
  victimBlock: string;
  domainId: string;
  domain: string;
  from: string;
  smtpUsername: string;
  message: string;
  smtpMessageId: string;
  /** Ids of keys the routes may rotate and revoke (not the keys the requests authenticate with). */
  spareBlockKeyId: string;
  spareAccountKeyId: string;
  webhookId: string;
  listId: string;
  contactId: string;
  templateId: string;
  campaignId: string;
  suppressionId: string;
  freeRecipientId: string;
  exportJobId: string;
  /** An OAuth client of the account (SMTP access tokens) and the redirect URI it registered. */
  oauthClientId: string;
  oauthClientSecret: string;
  oauthRedirectUri: string;
  creds: Record<'dashboardJwt' | 'blockApiKey' | 'accountApiKey' | 'publicBearer', Record<string, string>>;
}

/** `env`: more of Motor's settings (the agent-tool servers' public URLs, say). */
export async function startWorld(env: Record<string, string> = {}): Promise<World> {
  const h = await startAuthHarness({ API_REQUEST_LIMIT: '1000000', ANONYMOUS_REQUEST_LIMIT: '1000000', FREE_RECIPIENT_POSTS_PER_MINUTE: '10000', ...env });
  const email = 'fuzz-owner@rcpt.test';
  const a = await h.signUp(email);
  const a1 = await createBlockFor(h.motor, a.accountId);
  const a2 = await createBlockFor(h.motor, a.accountId);
  const dash = { authorization: `Bearer ${a.token}` };
  const base = h.motor.baseUrl;
  const created = async (path: string, body: unknown, headers: Record<string, string>, status = 201) => {
    const r = await postJson(`${base}${path}`, body, headers);
    if (r.status !== status) throw new Error(`fixture ${path}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body.data;
  };
  const blockKey = await created(`/api/motor-blocks/${a1.motorBlockId}/api-keys`, {}, dash);
  const spareBlockKey = await created(`/api/motor-blocks/${a1.motorBlockId}/api-keys`, { name: 'spare' }, dash);
  const accountKey = await created('/api/account/api-keys', {}, dash);
  const spareAccountKey = await created('/api/account/api-keys', { name: 'spare' }, dash);
  const token = await created('/api/public/token', { motorBlockId: a1.motorBlockId, scopes: [...SCOPES] }, dash, 200);
  const creds = {
    dashboardJwt: dash,
    blockApiKey: { 'x-api-key': blockKey.key as string },
    accountApiKey: { 'x-api-key': accountKey.key as string },
    publicBearer: { authorization: `Bearer ${token.token as string}` },
  };
  const from = `app@${a1.domain}`;
  const sent = await eventually(async () => {
    const r = await postJson(`${base}/v1/send`, { from, to: 'user@rcpt.test', subject: 's', text: 't' }, creds.blockApiKey);
    return r.status === 200 ? r : null;
  });
  const message = sent.body.data.id as string;
  const pub = creds.publicBearer;
  const webhook = await created(`/api/public/v1/motor-blocks/${a1.motorBlockId}/webhooks`, { url: 'https://hooks.example.test/motor' }, pub);
  await created('/api/public/v1/account/free-recipients', { email: 'friend@rcpt.test' }, pub, 200);
  const freeRecipientId = await eventually(async () => (await getJson(`${base}/api/public/v1/account/free-recipients`, pub)).body.data?.recipients?.[0]?.id as string | undefined);
  const exportJob = await created(`/api/public/v1/motor-blocks/${a1.motorBlockId}/exports`, {}, pub, 202);
  const oauthRedirectUri = 'https://app.example.test/cb';
  const oauthClient = await created('/api/oauth2/clients', { name: 'Fuzz app', redirectUris: [oauthRedirectUri] }, dash);
  const tenant = { ...dash, 'x-tenant-id': a.accountId };
  const list = await created('/comm-api/api/lists', { name: 'Fuzz list' }, tenant);
  const contact = await created(`/comm-api/api/lists/${list.id}/contacts`, { email: 'reader@rcpt.test', name: 'Reader' }, tenant);
  const template = await created('/comm-api/api/templates', { name: 'Fuzz', subject: 'Hi {{name}}', type: 'text', body_text: 'Hello {{unsubscribe_url}}' }, tenant);
  const campaign = await created('/comm-api/api/campaigns', { name: 'Fuzz campaign', template_id: template.id, list_id: list.id, motor_block_id: a1.motorBlockId, from }, tenant);
  const suppression = await created('/comm-api/api/suppressions', { email: 'gone@rcpt.test', note: 'fixture' }, tenant);
  // The campaign routes and the suppression list read projections: wait until they list the fixtures.
  await eventually(async () => (await getJson(`${base}/comm-api/api/campaigns/${campaign.id}`, tenant)).status === 200
    && (await getJson(`${base}/comm-api/api/suppressions`, tenant)).body.data?.items?.length > 0);
  return {
    h, accountId: a.accountId, email,
    block: a1.motorBlockId, victimBlock: a2.motorBlockId, domainId: a1.domainId, domain: a1.domain, from,
    smtpUsername: (await getBlock(h.motor.rt.db, a1.motorBlockId))!.smtpUsername,
    message, smtpMessageId: `<${message}@${a1.domain}>`,
    spareBlockKeyId: spareBlockKey.id, spareAccountKeyId: spareAccountKey.id,
    webhookId: webhook.id,
    listId: list.id, contactId: contact.id, templateId: template.id, campaignId: campaign.id,
    suppressionId: suppression.id,
    freeRecipientId,
    exportJobId: exportJob.jobId,
    oauthClientId: oauthClient.clientId, oauthClientSecret: oauthClient.clientSecret, oauthRedirectUri,
    creds,
  };
}

/** A fresh id that names nothing. */
export const nothing = (): string => randomUUID();
