import type { OutboundAllowlistBody } from '../../commands/http/DeveloperSandboxController';
import type {
  AssignDomainBody, ChangeTypeBody, ConfirmBody, CreateAccountMotorBlockBody, DeleteBlockBody, RenameBody,
} from '../controllers/AccountMotorBlocksController';
import type { ConvertSandboxBody, ProvisionSandboxBody } from '../controllers/AccountSandboxController';
import type { CampaignBody, CampaignSendBody, CampaignUpdateBody } from '../controllers/CommCampaignsController';
import type { ContactBatchBody, ContactBody, ContactUpdateBody } from '../controllers/CommContactsController';
import type { ContactListUpdateBody } from '../controllers/CommListsController';
import type { ContactListBody, ManualSuppressionBody, SuppressionBatchBody } from '../controllers/CommunicationsController';
import type { ExportBody } from '../controllers/ExportsController';
import type { FreeRecipientBody } from '../controllers/FreeRecipientsController';
import type { TemplateBody, TemplateUpdateBody } from '../controllers/TemplatesController';
import type { CreateWebhookBody, RotateSecretBody, UpdateWebhookBody } from '../controllers/WebhooksController';

/**
 * The request arguments whose handlers check them themselves (docs/ARCHITECTURE.md "Argument
 * validation"), so that each rule answers with the code the SPEC gives it (400
 * invalid_idempotency_key, 400 validation_error naming the field, 409
 * motor_block_type_not_allowed...) and not with tsoa's generic refusal.
 *
 * Their TypeScript types are the real ones (required fields required, formats, enums, bounds), so
 * the OpenAPI document tells a client what to send. tsoa validates each field named here as an
 * optional `any`, which is what it did when these types said `unknown`; the rest of the model
 * (its other fields, and the refusal of a field it does not declare) is validated as before.
 * Names are type-checked against the model; test/read-api/tsoaArgs.unit.test.ts checks the model
 * names against the generated models. So such a field's static type describes the document, not
 * the value: a controller hands the body to its handler, which takes `unknown` and checks it.
 */
const fields = <T>(...names: Array<keyof T & string>): readonly string[] => names;

/** Body model (its tsoa name) → the fields its handlers check. */
export const BODY_FIELDS_CHECKED_BY_HANDLER: Readonly<Record<string, readonly string[]>> = {
  // commands/blocks/accountBlocks.ts
  CreateAccountMotorBlockBody: fields<CreateAccountMotorBlockBody>('name', 'domainId', 'type', 'description'),
  RenameBody: fields<RenameBody>('name'),
  ChangeTypeBody: fields<ChangeTypeBody>('type', 'confirm'),
  AssignDomainBody: fields<AssignDomainBody>('domainId', 'confirm'),
  ConfirmBody: fields<ConfirmBody>('confirm'),
  DeleteBlockBody: fields<DeleteBlockBody>('confirm', 'deleteHistory'),
  // commands/sandbox/sandbox.ts
  ProvisionSandboxBody: fields<ProvisionSandboxBody>('handle', 'channel'),
  ConvertSandboxBody: fields<ConvertSandboxBody>('domainId', 'name', 'type'),
  OutboundAllowlistBody: fields<OutboundAllowlistBody>('addresses'),
  // commands/webhooks/webhooks.ts
  CreateWebhookBody: fields<CreateWebhookBody>('url', 'events', 'enabled'),
  UpdateWebhookBody: fields<UpdateWebhookBody>('url', 'events', 'enabled'),
  RotateSecretBody: fields<RotateSecretBody>('previousSecretValidForSeconds'),
  // commands/freeRecipients/freeRecipients.ts
  FreeRecipientBody: fields<FreeRecipientBody>('email'),
  // commands/exports/exports.ts (the other fields are tsoa's)
  ExportBody: fields<ExportBody>('jobType'),
  // domain/templates/templates.ts
  TemplateBody: fields<TemplateBody>('name', 'subject', 'type', 'body_html', 'body_text', 'sampleData'),
  TemplateUpdateBody: fields<TemplateUpdateBody>('name', 'subject', 'type', 'body_html', 'body_text', 'sampleData'),
  // domain/comms/
  ContactListBody: fields<ContactListBody>('name', 'description'),
  ContactListUpdateBody: fields<ContactListUpdateBody>('name', 'description'),
  ContactBody: fields<ContactBody>('email', 'name', 'fields'),
  ContactUpdateBody: fields<ContactUpdateBody>('name', 'fields', 'email'),
  ContactBatchBody: fields<ContactBatchBody>('contacts'),
  ManualSuppressionBody: fields<ManualSuppressionBody>('email', 'note'),
  SuppressionBatchBody: fields<SuppressionBatchBody>('suppressions'),
  CampaignBody: fields<CampaignBody>('name', 'template_id', 'list_id', 'motor_block_id', 'from', 'from_name', 'track_opens', 'track_clicks'),
  CampaignUpdateBody: fields<CampaignUpdateBody>('name', 'template_id', 'list_id', 'motor_block_id', 'from', 'from_name', 'track_opens', 'track_clicks'),
  CampaignSendBody: fields<CampaignSendBody>('scheduled_at'),
};

/**
 * Headers (lower case) that the handlers of every route taking them check: tsoa validates them as
 * optional and without validators (`@pattern` is for the document).
 */
export const HEADERS_CHECKED_BY_HANDLER: ReadonlySet<string> = new Set(['idempotency-key']);
