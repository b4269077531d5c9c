/** Registry of the read models: what `npm run replay -- <name>` and the projector role can run. */
import { accountsProjection } from './accounts/projection.js';
import { analyticsProjection } from './analytics/projection.js';
import { directoryProjection } from './directory/projection.js';
import { messagesProjection } from './messages/projection.js';
import { oauthClientsProjection } from './oauthClients/projection.js';
import { oauthConnectionsProjection } from './oauthConnections/projection.js';
import { smtpAuthProjection } from './smtpAuth/projection.js';
import { webhooksProjection } from './webhooks/projection.js';
import { exportsProjection } from './exports/projection.js';
import { templatesProjection } from './templates/projection.js';
import { contactListsProjection } from './contactLists/projection.js';
import { commSuppressionsProjection } from './commSuppressions/projection.js';
import { blockSuppressionsProjection } from './blockSuppressions/projection.js';
import { contactsProjection } from './contacts/projection.js';
import { commTrackingProjection } from './commTracking/projection.js';
import { campaignsProjection } from './campaigns/projection.js';
import type { Projection } from './runner.js';

export function allProjections(): Projection[] {
  return [directoryProjection, messagesProjection, analyticsProjection, accountsProjection, oauthClientsProjection, oauthConnectionsProjection, smtpAuthProjection, webhooksProjection, exportsProjection, templatesProjection,
    contactListsProjection, commSuppressionsProjection, contactsProjection, commTrackingProjection, campaignsProjection, blockSuppressionsProjection];
}

export function findProjection(name: string): Projection | undefined {
  return allProjections().find((p) => p.name === name);
}
