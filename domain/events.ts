/**
 * The event catalogue: every event Motor appends, with its stream category, schema version and
 * payload type. Adding a field that old readers can ignore keeps the version; anything else bumps
 * it and the projections learn both. Timestamps are ISO 8601 strings (UTC).
 */

export type Iso = string;

// ---------------------------------------------------------------- account-<uuid>
export interface AccountCreated { accountId: string; email: string; plan: string; createdAt: Iso }
/**
 * The operator moved the account to another plan tier (`npm run cli -- account set-plan`):
 * `plan` replaces `previousPlan` (AccountCreated.plan or the last change) from now on.
 */
export interface AccountPlanChanged { accountId: string; plan: string; previousPlan: string; changedAt: Iso }

// ---------------------------------------------------------------- accountEmail-<v5(address)> (docs/AUTH.md "One account per email")
/**
 * The address (trimmed, lower case) belongs to this account: the stream's first and only event,
 * appended with expectedRevision no_stream before the account is made (bootstrap, the first
 * dashboard password), or for an account made before claims existed when its address is next
 * claimed. The account's own AccountCreated may follow it (or, for an older account, precede it).
 */
export interface AccountEmailClaimed { email: string; accountId: string; claimedAt: Iso }

// ---------------------------------------------------------------- sendingDomain-<uuid>
export type DkimAlgorithm = 'rsa-sha256' | 'ed25519-sha256';
export interface DomainAdded {
  domainId: string; accountId: string; name: string;
  dkimSelector: string; dkimAlgorithm: DkimAlgorithm; dkimPublicKey: string;
  /** Key material lives in the key store (infra/keys), never in the log: only its id is here. */
  dkimKeyId: string;
  /** Random token the owner publishes at `_motor-verification.<name>` to prove ownership (docs/DOMAINS.md). Absent on old events. */
  ownershipToken?: string;
  /** `txt` (default): the owner publishes the key; `cname_managed`: a CNAME to a name the service serves. */
  dkimMode?: 'txt' | 'cname_managed';
  /** A service-owned sandbox domain (`<handle>.sandbox.<SERVICE_DOMAIN>`): no user DNS. */
  sandbox?: boolean;
  addedAt: Iso;
}
export interface DomainOwnershipVerified { domainId: string; method: 'dns' | 'trusted'; verifiedAt: Iso }
/** The result of one record's lookup after a DNS check (docs/DOMAINS.md "Check reasons"). */
export interface DomainRecordCheck {
  type: 'TXT' | 'CNAME'; name: string; value: string; purpose: 'ownership' | 'spf' | 'dkim' | 'dmarc';
  status: 'pending' | 'ok' | 'missing' | 'mismatch' | 'error';
  reason?: string;
  /** What the lookup found when it is not what was expected (joined TXT strings, CNAME target). */
  found?: string[];
}
export interface DomainDnsChecked {
  domainId: string; method: 'dns' | 'trusted';
  spfConfigured: boolean; dkimConfigured: boolean; dmarcConfigured: boolean;
  /** Per-record results of the check (absent on trusted and old events). */
  records?: DomainRecordCheck[];
  checkedAt: Iso;
}
/** A verify found no ownership token (the domain stays unverified); `reason` is the ownership record's. */
export interface DomainOwnershipCheckFailed { domainId: string; reason: string; found?: string[]; checkedAt: Iso }
/** cname_managed: a new signing key replaces the current one (the owner's CNAME is unchanged). */
export interface DomainDkimKeyRotated {
  domainId: string; dkimSelector: string; dkimAlgorithm: DkimAlgorithm; dkimPublicKey: string; dkimKeyId: string;
  previousKeyId: string; rotatedAt: Iso;
}

// ---------------------------------------------------------------- motorBlock-<uuid>
export type MotorBlockType = 'transactional' | 'general_purpose' | 'sandbox' | 'marketing' | 'portal';
export interface RateLimits { burst: number; hourly: number; daily: number }
export interface MotorBlockCreated {
  motorBlockId: string; accountId: string; name: string; type: MotorBlockType; description?: string;
  domainId: string; smtpUsername: string; authMethod: 'smtp_password' | 'api_key' | 'oauth2' | 'mtls';
  /** The grant the creating credential acts under (`account:<accountId>`); the block joins it by this very event (docs/BLOCKS.md). */
  grantId?: string;
  /** Create through the API: the Idempotency-Key and the SHA-256 fingerprint of the input (a retry compares them). */
  idempotencyKey?: string; inputFingerprint?: string;
  createdAt: Iso;
}
export interface MotorBlockLimitsSet { motorBlockId: string; limits: RateLimits; setAt: Iso }
/** `byOperator`: stopped by the service's operator (CLI), which the account cannot undo (docs/BLOCKS.md "Operator"). */
export interface MotorBlockDeactivated { motorBlockId: string; at: Iso; byOperator?: true }
/** A new SMTP password (generated, shown once); only its SHA-256 is recorded. Replaces the previous one. */
export interface SmtpPasswordSet { motorBlockId: string; passwordHash: string; setAt: Iso }
export interface MotorBlockReactivated { motorBlockId: string; at: Iso; byOperator?: true }

// ---------------------------------------------------------------- apiKey-<uuid>
export interface ApiKeyCreated {
  keyId: string; kind: 'block' | 'account'; accountId: string; motorBlockId?: string;
  /** Public lookup part of the key (`mk_live_<prefix>_...`). */
  prefix: string;
  /** SHA-256 of the secret, hex. The secret itself is shown once and never stored. */
  secretHash: string;
  /** Scopes this key may grant when minting tokens (account keys). */
  scopes: string[];
  /** Label given at creation (dashboard); absent on keys made by the CLI. */
  name?: string;
  createdAt: Iso;
}
export interface ApiKeyRevoked { keyId: string; revokedAt: Iso }

// ---------------------------------------------------------------- bootstrap-<accountId>
/**
 * `npm run cli -- bootstrap` names the credentials it is about to make, before it makes them: the
 * two API keys to come, and the block whose SMTP password it sets. A bootstrap without its
 * BootstrapFinished printed nothing, so the one that finishes the account revokes what every
 * earlier attempt named (commands/admin/bootstrap.ts).
 */
export interface BootstrapCredentialsReserved { accountId: string; motorBlockId: string; blockKeyId: string; accountKeyId: string; reservedAt: Iso }
/** The attempt whose credentials the CLI is about to print: the account is bootstrapped, a bootstrap of it is account_exists from now on. */
export interface BootstrapFinished { accountId: string; motorBlockId: string; blockKeyId: string; accountKeyId: string; finishedAt: Iso }

// ---------------------------------------------------------------- message-<uuid>
export interface MessageAccepted {
  messageId: string; motorBlockId: string; accountId: string; domainId: string;
  from: string; fromName: string | null; to: string[]; subject: string;
  text: string | null; html: string | null;
  /** Custom headers as given (validated, never a reserved name). */
  headers: Record<string, string>;
  /** RFC 5322 Message-ID, without angle brackets. */
  smtpMessageId: string;
  idempotencyKey: string | null;
  source: 'http' | 'smtp';
  /** Free-form metadata searchable in logs as metadata.<key>:<value>. */
  metadata: Record<string, string>;
  /** For SMTP submissions: the submitted RFC 5322 message (headers the service owns already replaced). */
  raw?: string;
  /** For SMTP submissions: the envelope sender (MAIL FROM) when it differs from `from` (e.g. a bounce address). */
  envelopeFrom?: string;
  /**
   * UTF-8 bytes of the content (`text`, `html`, `raw`, header names and values): what a delivery
   * worker holds to build and send the message, known before it reads the stream (the delivery job
   * carries it; DELIVERY_MAX_BUFFERED_BYTES). Added in version 1: older events lack it.
   */
  contentBytes?: number;
  acceptedAt: Iso;
}
/**
 * MessageAccepted's content: up to the SMTP size limit, read only by delivery (and the message's
 * own stream reads). Log consumers that index or count messages subscribe without them.
 */
export const MESSAGE_CONTENT_FIELDS = ['text', 'html', 'raw', 'headers'] as const satisfies readonly (keyof MessageAccepted)[];
interface RecipientOutcome { messageId: string; recipient: string; at: Iso }
interface SmtpReply { smtpCode: string | null; smtpResponse: string | null; enhancedCode?: string | null; mx?: string | null; attempt: number }
/** A delivery worker took the recipient's delivery in hand (outcome `processed`). */
export interface DeliveryStarted extends RecipientOutcome { attempt: number }
/** 2xx at the recipient's MX (outcome `delivered`). */
export interface DeliverySucceeded extends RecipientOutcome, SmtpReply {}
/** 4xx or no connection; another attempt is due at `nextAttemptAt` (outcome `deferred`). */
export interface DeliveryDeferred extends RecipientOutcome, SmtpReply {
  nextAttemptAt: Iso;
  /**
   * The message's content bytes (MessageAccepted.contentBytes, or counted from the content for an
   * acceptance older than that field): the retry job carries it, so the worker waits for room
   * before it reads the message (DELIVERY_MAX_BUFFERED_BYTES). Internal: no webhook or read model
   * shows it. Added in version 1: older events lack it.
   */
  contentBytes?: number;
}
/**
 * 5xx at the MX (outcome `bounced`), or an asynchronous bounce: a delivery status notification
 * (RFC 3464, `Action: failed`) received for a recipient whose MX or relay had accepted the message
 * (docs/DELIVERY.md "Asynchronous bounces and complaints"). Then `asynchronous` is true, `smtpCode`
 * / `smtpResponse` / `enhancedCode` come from the report's Diagnostic-Code and Status, `mx` from its
 * Remote-MTA, and `attempt` is the recipient's last attempt. Readers that ignore the field see a
 * bounce, as they should (added in version 1: old events lack it).
 */
export interface DeliveryBounced extends RecipientOutcome, SmtpReply { asynchronous?: true }
/** Gave up: lifetime exceeded, no MX, permanent local error (outcome `failed`). */
export interface DeliveryFailed extends RecipientOutcome, SmtpReply { reason: string }
/**
 * A feedback-loop report (ARF, RFC 5965) received for the recipient (outcome `complained`);
 * `feedbackType` is its Feedback-Type (abuse, fraud, ...) in lower case, null when absent.
 */
export interface ComplaintReceived extends RecipientOutcome { feedbackType: string | null }

// ---------------------------------------------------------------- smtpAuth-<motorBlockId | 'unknown'>
export type SmtpAuthFailureReason =
  | 'unknown_user' | 'bad_password' | 'no_password_set' | 'auth_method_mismatch' | 'authzid_mismatch' | 'locked_out' | 'invalid_token'
  // mTLS blocks (docs/SMTP.md): no client certificate, one that does not chain to SMTP_CLIENT_CA, or not the block's registered one.
  | 'client_certificate_required' | 'client_certificate_untrusted' | 'client_certificate_mismatch';
/** An SMTP AUTH attempt was refused (the block's owner sees these; unknown usernames go to `smtpAuth-unknown`). */
export interface SmtpAuthFailed {
  motorBlockId: string | null;
  /** The username as given, truncated to 128 characters. */
  username: string;
  mechanism: 'PLAIN' | 'LOGIN' | 'XOAUTH2';
  remoteAddress: string;
  reason: SmtpAuthFailureReason;
  /** SHA-256 fingerprint of the client certificate the TLS session presented, if any (mTLS). */
  clientCertificateFingerprint256?: string;
  at: Iso;
}

/**
 * AUTH failures from one client address that were counted, not recorded one by one: past
 * SMTP_REFUSAL_EVENT_LIMIT in SMTP_REFUSAL_EVENT_WINDOW_SECONDS (docs/SMTP.md "Error limits").
 * On `smtpAuth-unknown`: they may name several usernames, so no block's stream.
 */
export interface SmtpAuthFailuresSummarized {
  remoteAddress: string;
  /** The failures counted from `from` to `to`, answered but not recorded as SmtpAuthFailed. */
  failures: number;
  from: Iso;
  to: Iso;
  /** The settings in force: `limit` failures recorded per `windowSeconds`. */
  limit: number;
  windowSeconds: number;
}

// ---------------------------------------------------------------- motorBlock-<uuid>: SMTP mTLS (docs/SMTP.md)
/** The block's SMTP client certificate (PEM uploaded in the dashboard); only its SHA-256 fingerprint and description are kept. Replaces the previous one. */
export interface SmtpClientCertificateRegistered {
  motorBlockId: string;
  /** SHA-256 of the DER certificate, upper-case hex pairs separated by colons (as node's X509Certificate.fingerprint256). */
  fingerprint256: string;
  subject: string; issuer: string; serialNumber: string; notBefore: Iso; notAfter: Iso;
  registeredAt: Iso;
}
/** The block's SMTP authentication method was switched in the dashboard. */
export interface MotorBlockAuthMethodChanged {
  motorBlockId: string; authMethod: MotorBlockCreated['authMethod']; previousAuthMethod: MotorBlockCreated['authMethod']; changedAt: Iso;
}

// ---------------------------------------------------------------- smtpSubmission-<motorBlockId>
/**
 * An authenticated SMTP submission was refused: at MAIL FROM (sender domain, DNS, block state, the
 * null sender), at RCPT TO (sandbox allowlist, Free-plan recipients) or after DATA (quota, content).
 */
export interface SmtpSubmissionRefused {
  motorBlockId: string;
  /** The DomainError code (`rate_limited_block`, `from_domain_mismatch`, ...) or an SMTP-level one (`invalid_message`, `null_sender_not_allowed`). */
  code: string;
  /** The reply the client got, e.g. `451 4.7.1 Rate limit exceeded (burst): 3/3. Retry in 42s.` */
  reply: string;
  envelopeFrom: string;
  /** The recipients refused: 0 at MAIL FROM, 1 at RCPT TO, the envelope's at DATA. */
  recipientCount: number;
  remoteAddress: string;
  at: Iso;
}

/**
 * Submission refusals of one block that were counted, not recorded one by one: past
 * SMTP_REFUSAL_EVENT_LIMIT in SMTP_REFUSAL_EVENT_WINDOW_SECONDS (docs/SMTP.md "Error limits").
 */
export interface SmtpSubmissionRefusalsSummarized {
  motorBlockId: string;
  /** The refusals counted from `from` to `to`, answered but not recorded as SmtpSubmissionRefused. */
  refusals: number;
  from: Iso;
  to: Iso;
  /** The settings in force: `limit` refusals recorded per `windowSeconds`. */
  limit: number;
  windowSeconds: number;
}

// ---------------------------------------------------------------- user-<uuid> (onboarding, login; docs/AUTH.md)
/** Someone asked to register with this address (the user id is derived from the address). */
export interface AccountRegistered { userId: string; accountId: string; email: string; registeredAt: Iso }
/** A 6-digit code was mailed; only its HMAC is recorded. */
export interface VerificationCodeIssued { userId: string; codeHash: string; expiresAt: Iso; issuedAt: Iso }
/** A wrong code was presented (`failures` counts the current code's failures). */
export interface VerificationCodeRejected { userId: string; failures: number; at: Iso }
/** The right code: the address is proven and a single-use setup token (hash only) was issued. */
export interface EmailVerified { userId: string; setupTokenHash: string; setupTokenExpiresAt: Iso; verifiedAt: Iso }
/** A password was set with the setup token (scrypt hash, never the password). */
export interface PasswordSet { userId: string; accountId: string; passwordHash: string; channel: string; setAt: Iso }
export interface LoginSucceeded { userId: string; sessionId: string; at: Iso }
export interface LoginFailed { userId: string; failures: number; remoteAddress: string | null; at: Iso }
/** Too many failures: login (or code verification) is refused until `until`. */
export interface UserLockedOut { userId: string; reason: 'login' | 'verification'; until: Iso; at: Iso }

// ---------------------------------------------------------------- authSession-<uuid> (one refresh-token family)
export interface SessionStarted { sessionId: string; userId: string; accountId: string; channel: string; refreshTokenHash: string; refreshExpiresAt: Iso; startedAt: Iso }
export interface RefreshTokenRotated { sessionId: string; previousHash: string; refreshTokenHash: string; refreshExpiresAt: Iso; at: Iso }
/** The family is dead: a spent refresh token was presented again (`refresh_token_reuse`). */
export interface SessionRevoked { sessionId: string; reason: 'refresh_token_reuse'; at: Iso }

// ---------------------------------------------------------------- webHandoff-<uuid>
export interface WebHandoffIssued { handoffId: string; userId: string; accountId: string; codeHash: string; redirectPath: string; expiresAt: Iso; issuedAt: Iso }
export interface WebHandoffRedeemed { handoffId: string; sessionId: string; at: Iso }

// ---------------------------------------------------------------- oauthClient-<clientId> (docs/OAUTH.md)
/** An OAuth 2.0 client of the SMTP authorization server; only the SHA-256 of its secret is recorded. */
export interface OAuthClientRegistered {
  clientId: string; accountId: string; name: string; redirectUris: string[]; secretHash: string;
  /** `cli` or `user:<uuid>`. */
  registeredBy: string;
  registeredAt: Iso;
}

// ---------------------------------------------------------------- oauthGrant-<grantId> (one consent: its code, then one token family)
/** A signed-in user was shown the consent page; the one-time form token is recorded as a hash. */
export interface OAuthConsentRequested {
  grantId: string; clientId: string; accountId: string; userId: string; sessionId: string;
  redirectUri: string; scope: string; state: string | null; motorBlockId: string | null;
  formTokenHash: string; expiresAt: Iso; requestedAt: Iso;
  /**
   * Agent clients only (docs/MCP.md; absent on SMTP grants, which predate them): the MCP server's
   * canonical URI the tokens are bound to, and the name of the client's metadata document as it was
   * when the user consented (`clientId` is then the document's URL).
   */
  resource?: string;
  /** The PKCE S256 challenge: always on agent grants; on SMTP grants when the client sent one (docs/OAUTH.md). */
  codeChallenge?: string;
  /** Agent clients only (see `resource`). */
  clientName?: string;
}
/** The user approved: an authorization code (hash only; 60 s, single use) bound to one block (SMTP) or to none (agent grants: account-wide). */
export interface OAuthCodeIssued { grantId: string; motorBlockId: string | null; codeHash: string; expiresAt: Iso; issuedAt: Iso }
/** The code was exchanged: an access token (`jti` = tokenId) and the first refresh token (hash). */
export interface OAuthTokenIssued { grantId: string; tokenId: string; refreshTokenHash: string; accessExpiresAt: Iso; refreshExpiresAt: Iso; issuedAt: Iso }
/** A refresh token was spent for a new pair. */
export interface OAuthRefreshRotated { grantId: string; tokenId: string; previousHash: string; refreshTokenHash: string; accessExpiresAt: Iso; refreshExpiresAt: Iso; at: Iso }
/** The user denied the consent. */
export interface OAuthConsentDenied { grantId: string; at: Iso }
/** Every token of the grant is dead: a code or a spent refresh token was presented again, or the user revoked the connection. */
export interface OAuthGrantRevoked {
  grantId: string; reason: 'code_reuse' | 'refresh_token_reuse' | 'user_revoked' | 'client_revoked'; at: Iso;
  /** `user:<uuid>` for user_revoked, `oauthClient:<client id>` for client_revoked (RFC 7009 revocation request). */
  by?: string;
}

// ---------------------------------------------------------------- sandbox (docs/SANDBOX.md)
/** account-<accountId>: the account's sandbox was provisioned (its domain and locked block exist from the same step). */
export interface SandboxProvisioned { accountId: string; handle: string; domainId: string; motorBlockId: string; channel: string; provisionedAt: Iso }
/** sandboxHandle-<handle>: the handle (a DNS label) is held by this account; the first append wins. */
export interface SandboxHandleClaimed { handle: string; accountId: string; claimedAt: Iso }
/** motorBlock-<id> (sandbox block): the outbound allowlist set by the owner (the account owner's address is always allowed on top). */
export interface SandboxAllowlistUpdated { motorBlockId: string; accountId: string; addresses: string[]; updatedAt: Iso }
/** motorBlock-<id>: one-way conversion of the sandbox block to a production block on a verified domain; the allowlist lock is lifted. */
export interface SandboxConverted {
  motorBlockId: string; accountId: string; domainId: string; name: string; type: 'transactional' | 'general_purpose';
  previousSmtpUsername: string; smtpUsername: string; convertedAt: Iso;
}

// ---------------------------------------------------------------- account-<accountId>: its blocks (docs/BLOCKS.md "Plan limit")
// The account's stream lists its blocks, so the plan limit and name uniqueness are decided on
// streams (the account's, then each listed block's), never on the directory. A block's facts
// (name, type, deleted) stay on its own stream; these events only say which blocks are the account's.
/** From here on every block created in the account is recorded (AccountBlockAdded); the older ones follow in AccountBlocksListed. */
export interface AccountBlockListingStarted { accountId: string; startedAt: Iso }
/**
 * The blocks the account had before its stream recorded them: on an account of an earlier release,
 * read from the directory once it had projected the log up to AccountBlockListingStarted; [] on an
 * account created since (recorded with AccountCreated).
 */
export interface AccountBlocksListed { accountId: string; motorBlockIds: string[]; listedAt: Iso }
/** A block is being created in the account; appended before the block's own stream (a listed id whose stream never came is no block). */
export interface AccountBlockAdded { accountId: string; motorBlockId: string; addedAt: Iso }

// ---------------------------------------------------------------- freeRecipients-<accountId> (docs/SANDBOX.md)
/** A confirmation link was issued for `email` (only the SHA-256 of its single-use token is recorded). */
export interface FreeRecipientRequested {
  accountId: string; recipientId: string; email: string; tokenHash: string; expiresAt: Iso; requestedAt: Iso;
}
/** The emailed link was opened: Free-plan sends to `email` are allowed. */
export interface FreeRecipientConfirmed { accountId: string; recipientId: string; email: string; confirmedAt: Iso }
export interface FreeRecipientRemoved { accountId: string; recipientId: string; email: string; removedAt: Iso }
/** The confirmation mail of the request with `tokenHash` could not be handed to the pipeline (502): that pending request is void. */
export interface FreeRecipientMailFailed { accountId: string; recipientId: string; tokenHash: string; at: Iso }

// ---------------------------------------------------------------- motorBlock-<uuid>: lifecycle (docs/BLOCKS.md)
export interface MotorBlockRenamed { motorBlockId: string; name: string; at: Iso }
export interface MotorBlockTypeChanged { motorBlockId: string; type: 'transactional' | 'general_purpose'; at: Iso }
export interface MotorBlockDomainAssigned { motorBlockId: string; domainId: string; previousDomainId: string; at: Iso }
/** Delete asked (the block was inactive): the deletion job `jobId` is queued; the status stays readable after the block is gone. */
export interface MotorBlockDeletionRequested { motorBlockId: string; accountId: string; jobId: string; deleteHistory: boolean; requestedAt: Iso }
/** The deletion job took the request in hand (status running). */
export interface MotorBlockDeletionStarted { motorBlockId: string; jobId: string; at: Iso }
/**
 * The tombstone: the block is gone (status deleted; its keys and SMTP login stop working). With
 * `historyDeleted` its message and SMTP streams were removed from the store before this event, and
 * projections drop the block's rows when they see it, so a replay from zero ends in the same state.
 */
export interface MotorBlockDeleted {
  motorBlockId: string; accountId: string; jobId: string; historyDeleted: boolean;
  messagesDeleted: number; streamsDeleted: number; eventsDeleted: number; deletedAt: Iso;
}
/** The deletion job gave up (the block stays in deletion_queued; a new DELETE re-queues the same job). */
export interface MotorBlockDeletionFailed { motorBlockId: string; jobId: string; reason: string; at: Iso }

// ---------------------------------------------------------------- webhook-<uuid> (docs/WEBHOOKS.md)
/** The six outcome event names a webhook can subscribe to (SPEC "Webhook events"). */
export type WebhookEventName = 'message.processed' | 'message.deferred' | 'message.delivered' | 'message.bounced' | 'message.failed' | 'message.complained';
export interface WebhookCreated {
  webhookId: string; motorBlockId: string; accountId: string; url: string; events: WebhookEventName[];
  /** The signing secret lives in the key store (encrypted), never in the log: only its id is here. */
  secretKeyId: string;
  createdAt: Iso;
}
/** The endpoint's whole new state (url, events, enabled) after a PUT. */
export interface WebhookUpdated { webhookId: string; motorBlockId: string; url: string; events: WebhookEventName[]; enabled: boolean; updatedAt: Iso }
export interface WebhookDeleted { webhookId: string; motorBlockId: string; deletedAt: Iso }
/**
 * The signing secret was replaced (POST .../rotate-secret): `secretKeyId` signs from now on. The
 * secret it replaces (`previousSecretKeyId`) still signs X-Service-Signature-Previous until
 * `previousValidUntil` (null: dropped at once). Only one previous secret: a rotation inside the
 * window drops the one before. Both secrets live in the key store, never in the log.
 */
export interface WebhookSecretRotated {
  webhookId: string; motorBlockId: string; secretKeyId: string; previousSecretKeyId: string;
  previousValidUntil: Iso | null; rotatedAt: Iso;
}
/**
 * The webhook worker paused an endpoint whose deliveries kept failing: a delivery ended `failed`
 * and no attempt had succeeded since `since` (the last success, or the endpoint's creation or last
 * re-enabling), at least WEBHOOK_DISABLE_AFTER_DAYS before `disabledAt`. As a PUT `enabled: false`;
 * a PUT `enabled: true` resumes it.
 */
export interface WebhookEndpointDisabled {
  webhookId: string; motorBlockId: string; reason: 'failing'; since: Iso;
  /** The delivery whose final failure decided it. */
  deliveryId: string;
  disabledAt: Iso;
}

// ---------------------------------------------------------------- webhookDelivery-<deliveryId>
/**
 * One delivery of one event to one endpoint, decided by the dispatcher (an outcome event of a
 * message of the block) or by POST .../test. `payload` is the exact JSON every attempt sends.
 */
export interface WebhookDeliveryQueued {
  deliveryId: string; webhookId: string; motorBlockId: string;
  event: WebhookEventName | 'webhook.test';
  messageId: string | null;
  payload: Record<string, unknown>;
  queuedAt: Iso;
}
/** One HTTP attempt: `delivered` (2xx), `retrying` (another attempt at nextAttemptAt) or `failed` (gave up). */
export interface WebhookDeliveryAttempted {
  deliveryId: string; webhookId: string; motorBlockId: string; attempt: number;
  outcome: 'delivered' | 'retrying' | 'failed';
  httpStatus: number | null; error: string | null; responseBody: string | null; durationMs: number;
  nextAttemptAt: Iso | null;
  attemptedAt: Iso;
  /** The delivery's event (a `webhook.test` never counts for the failure clock). Absent on events before it was added. */
  event?: WebhookEventName | 'webhook.test';
}

// ---------------------------------------------------------------- export-<uuid> (docs/EXPORTS.md)
/** A logs export asked for: the window and filters are resolved (retention applied) when asked. */
export interface ExportRequested {
  jobId: string; motorBlockId: string; accountId: string; jobType: 'logs';
  from: Iso; to: Iso; query: string | null; status: string | null; includePII: boolean;
  requestedAt: Iso;
}
/** The NDJSON file is stored (gzip, in chunks) and downloadable until `expiresAt`. */
export interface ExportCompleted { jobId: string; motorBlockId: string; rows: number; bytes: number; truncated: boolean; expiresAt: Iso; completedAt: Iso }
export interface ExportFailed { jobId: string; motorBlockId: string; reason: string; failedAt: Iso }

// ---------------------------------------------------------------- template-<uuid> (communications; docs/TEMPLATES.md)
export interface TemplateContentData { name: string; subject: string; type: 'html' | 'text'; body_html: string | null; body_text: string | null }
export interface TemplateCreated { templateId: string; tenantId: string; content: TemplateContentData; createdAt: Iso }
/** The template's whole content after a PATCH. */
export interface TemplateUpdated { templateId: string; tenantId: string; content: TemplateContentData; updatedAt: Iso }
export interface TemplateDeleted { templateId: string; tenantId: string; deletedAt: Iso }

// ---------------------------------------------------------------- contactLists-<tenantId> (communications; docs/COMMUNICATIONS.md)
/** A contact list of the tenant; the tenant's stream holds all of them (unique names and the cap are decided on it). */
export interface ContactListCreated { listId: string; tenantId: string; name: string; description: string | null; createdAt: Iso }
/** A list renamed or its description changed (PATCH): the name and description after the change, whole. */
export interface ContactListUpdated { listId: string; tenantId: string; name: string; description: string | null; updatedAt: Iso }
/** A list deleted: its name is free again and it no longer counts toward the cap; its contacts leave every read. */
export interface ContactListDeleted { listId: string; tenantId: string; deletedAt: Iso }

// ---------------------------------------------------------------- contact-<contactId> (communications; docs/COMMUNICATIONS.md "Contacts")
// contactId = uuidV5 of (tenant, list, lower-cased address): one stream per address and list, so
// "already on the list" is decided by the stream's revision.
/** An address put on a list (again, after a removal: the stream goes on). `email` is trimmed and lower-cased. */
export interface ContactAdded { contactId: string; tenantId: string; listId: string; email: string; name: string | null; fields: Record<string, string>; addedAt: Iso }
export interface ContactRemoved { contactId: string; tenantId: string; listId: string; email: string; removedAt: Iso }
/** The contact's name or merge fields changed (PATCH): the values after the change, whole. */
export interface ContactUpdated { contactId: string; tenantId: string; listId: string; name: string | null; fields: Record<string, string>; updatedAt: Iso }
/** The contact used its unsubscribe link: `one_click` = RFC 8058 POST from the mail client, `page` = the confirm button. */
export interface ContactUnsubscribed { contactId: string; tenantId: string; listId: string; email: string; via: 'one_click' | 'page'; unsubscribedAt: Iso }

// ---------------------------------------------------------------- suppression-<suppressionId> (communications; docs/COMMUNICATIONS.md "Suppressions", "Lifting a suppression")
/**
 * The tenant suppressed an address by hand (`POST /suppressions`, reason `manual`): active until the
 * next SuppressionLifted on the stream. `email` is lower-cased; `note` the tenant's own (trimmed, or
 * null); the stream id is the suppression's id. The actor is in the metadata.
 */
export interface SuppressionAdded { suppressionId: string; tenantId: string; email: string; note: string | null; addedAt: Iso }
/**
 * The tenant lifted the suppression of an address: the hard bounces recorded for it up to
 * `liftedAt`, and the manual adds before it on the stream, no longer suppress it (complaints and
 * unsubscribes are never lifted; a later hard bounce or manual add suppresses it again). `email`
 * is lower-cased; the stream id is the suppression's id.
 */
export interface SuppressionLifted { suppressionId: string; tenantId: string; email: string; liftedAt: Iso }

// ---------------------------------------------------------------- blockSuppression-<uuidV5(block:address)> (docs/DELIVERY.md "Suppressions")
/**
 * The block's owner lifted the suppression of an address on the block's transactional mail
 * (`DELETE /api/public/v1/motor-blocks/{id}/suppressions/{address}`): the hard bounces and
 * complaints recorded for it up to `liftedAt` no longer suppress it; one recorded after does again.
 * `address` is lower-cased; the stream id is blockSuppressionIdOf(block, address). The actor is in the metadata.
 */
export interface BlockSuppressionLifted { motorBlockId: string; address: string; liftedAt: Iso }

// ---------------------------------------------------------------- tracking-<messageId> (campaign opens and clicks; docs/COMMUNICATIONS.md "Tracking")
/**
 * What an open or a click knows of its reader. `recipient` is the single `to` of the message's
 * `MessageAccepted` (the tracking URL carries no address); `ip` is truncated (IPv4 /24, IPv6 /48);
 * `userAgent` at most 512 characters.
 */
export interface TrackingHit { tenantId: string; motorBlockId: string; campaignId: string; messageId: string; recipient: string; userAgent: string | null; ip: string | null; occurredAt: Iso }
/** The open pixel of a campaign message was fetched (a signed token; GET only). */
export interface EmailOpened extends TrackingHit {}
/** A rewritten link of a campaign message was followed; `url` is the signed destination. */
export interface LinkClicked extends TrackingHit { url: string }

// ---------------------------------------------------------------- campaign-<uuid> (communications; docs/COMMUNICATIONS.md "Campaigns")
/** Contacts a campaign has reached: each one is accepted, skipped as suppressed, or failed (a per-recipient refusal). */
export interface CampaignCounts { recipients: number; accepted: number; skippedSuppressed: number; failed: number }
export interface CampaignCreated {
  campaignId: string; tenantId: string; name: string; templateId: string; listId: string; motorBlockId: string;
  from: string; fromName: string | null; trackOpens: boolean; trackClicks: boolean; createdAt: Iso;
}
/** Sending was asked for. The template's content then is what every message renders: a later edit or delete of the template does not change a campaign under way. */
export interface CampaignSendStarted {
  campaignId: string; tenantId: string;
  template: { subject: string; body_html: string | null; body_text: string | null };
  /** The `{{identity_name}}` value: the campaign's from_name, else the block's name. */
  identityName: string;
  startedAt: Iso;
}
/** A checkpoint of the sender: every contact up to `lastContactId` (contactId order) is done. `resumeAt`: paused by the block's quota (or an unusable block) until then. */
export interface CampaignProgressed { campaignId: string; tenantId: string; lastContactId: string | null; counts: CampaignCounts; resumeAt?: Iso; pausedReason?: string; at: Iso }
export interface CampaignSendCompleted { campaignId: string; tenantId: string; lastContactId: string | null; counts: CampaignCounts; completedAt: Iso }
/** Stops a draft, scheduled or sending campaign; messages already accepted are delivered. */
export interface CampaignCancelled { campaignId: string; tenantId: string; cancelledAt: Iso }
/** A draft is to start sending at `scheduledAt` (the sender starts it then, as an immediate send would). */
export interface CampaignScheduled { campaignId: string; tenantId: string; scheduledAt: Iso; at: Iso }
/** The fields of a draft that changed (only those given, with their new values). */
export interface CampaignUpdated {
  campaignId: string; tenantId: string;
  changes: Partial<Pick<CampaignCreated, 'name' | 'templateId' | 'listId' | 'motorBlockId' | 'from' | 'fromName' | 'trackOpens' | 'trackClicks'>>;
  at: Iso;
}
/** A scheduled campaign came due but could not start for good (its template, list or block is gone): it ends, never sent. `code` is the check's error code. */
export interface CampaignScheduledStartFailed { campaignId: string; tenantId: string; code: string; at: Iso }
/** A draft, sent or cancelled campaign is gone from the API; the messages it sent are ordinary messages and stay. */
export interface CampaignDeleted { campaignId: string; tenantId: string; at: Iso }

export interface EventCatalogue {
  AccountCreated: AccountCreated;
  AccountPlanChanged: AccountPlanChanged;
  AccountEmailClaimed: AccountEmailClaimed;
  AccountBlockListingStarted: AccountBlockListingStarted;
  AccountBlocksListed: AccountBlocksListed;
  AccountBlockAdded: AccountBlockAdded;
  DomainAdded: DomainAdded;
  DomainOwnershipVerified: DomainOwnershipVerified;
  DomainDnsChecked: DomainDnsChecked;
  DomainOwnershipCheckFailed: DomainOwnershipCheckFailed;
  DomainDkimKeyRotated: DomainDkimKeyRotated;
  MotorBlockCreated: MotorBlockCreated;
  MotorBlockLimitsSet: MotorBlockLimitsSet;
  MotorBlockDeactivated: MotorBlockDeactivated;
  MotorBlockReactivated: MotorBlockReactivated;
  SmtpPasswordSet: SmtpPasswordSet;
  ApiKeyCreated: ApiKeyCreated;
  ApiKeyRevoked: ApiKeyRevoked;
  BootstrapCredentialsReserved: BootstrapCredentialsReserved;
  BootstrapFinished: BootstrapFinished;
  MessageAccepted: MessageAccepted;
  DeliveryStarted: DeliveryStarted;
  DeliverySucceeded: DeliverySucceeded;
  DeliveryDeferred: DeliveryDeferred;
  DeliveryBounced: DeliveryBounced;
  DeliveryFailed: DeliveryFailed;
  ComplaintReceived: ComplaintReceived;
  SmtpAuthFailed: SmtpAuthFailed;
  SmtpClientCertificateRegistered: SmtpClientCertificateRegistered;
  MotorBlockAuthMethodChanged: MotorBlockAuthMethodChanged;
  SmtpSubmissionRefused: SmtpSubmissionRefused;
  SmtpSubmissionRefusalsSummarized: SmtpSubmissionRefusalsSummarized;
  SmtpAuthFailuresSummarized: SmtpAuthFailuresSummarized;
  AccountRegistered: AccountRegistered;
  VerificationCodeIssued: VerificationCodeIssued;
  VerificationCodeRejected: VerificationCodeRejected;
  EmailVerified: EmailVerified;
  PasswordSet: PasswordSet;
  LoginSucceeded: LoginSucceeded;
  LoginFailed: LoginFailed;
  UserLockedOut: UserLockedOut;
  SessionStarted: SessionStarted;
  RefreshTokenRotated: RefreshTokenRotated;
  SessionRevoked: SessionRevoked;
  WebHandoffIssued: WebHandoffIssued;
  WebHandoffRedeemed: WebHandoffRedeemed;
  OAuthClientRegistered: OAuthClientRegistered;
  OAuthConsentRequested: OAuthConsentRequested;
  OAuthCodeIssued: OAuthCodeIssued;
  OAuthTokenIssued: OAuthTokenIssued;
  OAuthRefreshRotated: OAuthRefreshRotated;
  OAuthConsentDenied: OAuthConsentDenied;
  OAuthGrantRevoked: OAuthGrantRevoked;
  SandboxProvisioned: SandboxProvisioned;
  SandboxHandleClaimed: SandboxHandleClaimed;
  SandboxAllowlistUpdated: SandboxAllowlistUpdated;
  SandboxConverted: SandboxConverted;
  FreeRecipientRequested: FreeRecipientRequested;
  FreeRecipientConfirmed: FreeRecipientConfirmed;
  FreeRecipientRemoved: FreeRecipientRemoved;
  FreeRecipientMailFailed: FreeRecipientMailFailed;
  MotorBlockRenamed: MotorBlockRenamed;
  MotorBlockTypeChanged: MotorBlockTypeChanged;
  MotorBlockDomainAssigned: MotorBlockDomainAssigned;
  MotorBlockDeletionRequested: MotorBlockDeletionRequested;
  MotorBlockDeletionStarted: MotorBlockDeletionStarted;
  MotorBlockDeleted: MotorBlockDeleted;
  MotorBlockDeletionFailed: MotorBlockDeletionFailed;
  WebhookCreated: WebhookCreated;
  WebhookUpdated: WebhookUpdated;
  WebhookDeleted: WebhookDeleted;
  WebhookSecretRotated: WebhookSecretRotated;
  WebhookEndpointDisabled: WebhookEndpointDisabled;
  WebhookDeliveryQueued: WebhookDeliveryQueued;
  WebhookDeliveryAttempted: WebhookDeliveryAttempted;
  ExportRequested: ExportRequested;
  ExportCompleted: ExportCompleted;
  ExportFailed: ExportFailed;
  TemplateCreated: TemplateCreated;
  TemplateUpdated: TemplateUpdated;
  TemplateDeleted: TemplateDeleted;
  ContactListCreated: ContactListCreated;
  ContactListUpdated: ContactListUpdated;
  ContactListDeleted: ContactListDeleted;
  CampaignCreated: CampaignCreated;
  CampaignSendStarted: CampaignSendStarted;
  CampaignProgressed: CampaignProgressed;
  CampaignSendCompleted: CampaignSendCompleted;
  CampaignCancelled: CampaignCancelled;
  CampaignScheduled: CampaignScheduled;
  CampaignUpdated: CampaignUpdated;
  CampaignScheduledStartFailed: CampaignScheduledStartFailed;
  CampaignDeleted: CampaignDeleted;
  ContactAdded: ContactAdded;
  ContactRemoved: ContactRemoved;
  ContactUnsubscribed: ContactUnsubscribed;
  ContactUpdated: ContactUpdated;
  EmailOpened: EmailOpened;
  LinkClicked: LinkClicked;
  SuppressionAdded: SuppressionAdded;
  SuppressionLifted: SuppressionLifted;
  BlockSuppressionLifted: BlockSuppressionLifted;
}

export type EventType = keyof EventCatalogue;

/** Category (stream prefix) and current schema version of every event type. */
export const EVENT_TYPES: { [T in EventType]: { category: string; version: number } } = {
  AccountCreated: { category: 'account', version: 1 },
  AccountPlanChanged: { category: 'account', version: 1 },
  AccountEmailClaimed: { category: 'accountEmail', version: 1 },
  AccountBlockListingStarted: { category: 'account', version: 1 },
  AccountBlocksListed: { category: 'account', version: 1 },
  AccountBlockAdded: { category: 'account', version: 1 },
  DomainAdded: { category: 'sendingDomain', version: 1 },
  DomainOwnershipVerified: { category: 'sendingDomain', version: 1 },
  DomainDnsChecked: { category: 'sendingDomain', version: 1 },
  DomainOwnershipCheckFailed: { category: 'sendingDomain', version: 1 },
  DomainDkimKeyRotated: { category: 'sendingDomain', version: 1 },
  MotorBlockCreated: { category: 'motorBlock', version: 1 },
  MotorBlockLimitsSet: { category: 'motorBlock', version: 1 },
  MotorBlockDeactivated: { category: 'motorBlock', version: 1 },
  MotorBlockReactivated: { category: 'motorBlock', version: 1 },
  SmtpPasswordSet: { category: 'motorBlock', version: 1 },
  ApiKeyCreated: { category: 'apiKey', version: 1 },
  ApiKeyRevoked: { category: 'apiKey', version: 1 },
  BootstrapCredentialsReserved: { category: 'bootstrap', version: 1 },
  BootstrapFinished: { category: 'bootstrap', version: 1 },
  MessageAccepted: { category: 'message', version: 1 },
  DeliveryStarted: { category: 'message', version: 1 },
  DeliverySucceeded: { category: 'message', version: 1 },
  DeliveryDeferred: { category: 'message', version: 1 },
  DeliveryBounced: { category: 'message', version: 1 },
  DeliveryFailed: { category: 'message', version: 1 },
  ComplaintReceived: { category: 'message', version: 1 },
  SmtpAuthFailed: { category: 'smtpAuth', version: 1 },
  SmtpClientCertificateRegistered: { category: 'motorBlock', version: 1 },
  MotorBlockAuthMethodChanged: { category: 'motorBlock', version: 1 },
  SmtpSubmissionRefused: { category: 'smtpSubmission', version: 1 },
  SmtpSubmissionRefusalsSummarized: { category: 'smtpSubmission', version: 1 },
  SmtpAuthFailuresSummarized: { category: 'smtpAuth', version: 1 },
  AccountRegistered: { category: 'user', version: 1 },
  VerificationCodeIssued: { category: 'user', version: 1 },
  VerificationCodeRejected: { category: 'user', version: 1 },
  EmailVerified: { category: 'user', version: 1 },
  PasswordSet: { category: 'user', version: 1 },
  LoginSucceeded: { category: 'user', version: 1 },
  LoginFailed: { category: 'user', version: 1 },
  UserLockedOut: { category: 'user', version: 1 },
  SessionStarted: { category: 'authSession', version: 1 },
  RefreshTokenRotated: { category: 'authSession', version: 1 },
  SessionRevoked: { category: 'authSession', version: 1 },
  WebHandoffIssued: { category: 'webHandoff', version: 1 },
  WebHandoffRedeemed: { category: 'webHandoff', version: 1 },
  OAuthClientRegistered: { category: 'oauthClient', version: 1 },
  OAuthConsentRequested: { category: 'oauthGrant', version: 1 },
  OAuthCodeIssued: { category: 'oauthGrant', version: 1 },
  OAuthTokenIssued: { category: 'oauthGrant', version: 1 },
  OAuthRefreshRotated: { category: 'oauthGrant', version: 1 },
  OAuthConsentDenied: { category: 'oauthGrant', version: 1 },
  OAuthGrantRevoked: { category: 'oauthGrant', version: 1 },
  SandboxProvisioned: { category: 'account', version: 1 },
  SandboxHandleClaimed: { category: 'sandboxHandle', version: 1 },
  SandboxAllowlistUpdated: { category: 'motorBlock', version: 1 },
  SandboxConverted: { category: 'motorBlock', version: 1 },
  FreeRecipientRequested: { category: 'freeRecipients', version: 1 },
  FreeRecipientConfirmed: { category: 'freeRecipients', version: 1 },
  FreeRecipientRemoved: { category: 'freeRecipients', version: 1 },
  FreeRecipientMailFailed: { category: 'freeRecipients', version: 1 },
  MotorBlockRenamed: { category: 'motorBlock', version: 1 },
  MotorBlockTypeChanged: { category: 'motorBlock', version: 1 },
  MotorBlockDomainAssigned: { category: 'motorBlock', version: 1 },
  MotorBlockDeletionRequested: { category: 'motorBlock', version: 1 },
  MotorBlockDeletionStarted: { category: 'motorBlock', version: 1 },
  MotorBlockDeleted: { category: 'motorBlock', version: 1 },
  MotorBlockDeletionFailed: { category: 'motorBlock', version: 1 },
  WebhookCreated: { category: 'webhook', version: 1 },
  WebhookUpdated: { category: 'webhook', version: 1 },
  WebhookDeleted: { category: 'webhook', version: 1 },
  WebhookSecretRotated: { category: 'webhook', version: 1 },
  WebhookEndpointDisabled: { category: 'webhook', version: 1 },
  WebhookDeliveryQueued: { category: 'webhookDelivery', version: 1 },
  WebhookDeliveryAttempted: { category: 'webhookDelivery', version: 1 },
  ExportRequested: { category: 'export', version: 1 },
  ExportCompleted: { category: 'export', version: 1 },
  ExportFailed: { category: 'export', version: 1 },
  TemplateCreated: { category: 'template', version: 1 },
  TemplateUpdated: { category: 'template', version: 1 },
  TemplateDeleted: { category: 'template', version: 1 },
  ContactListCreated: { category: 'contactLists', version: 1 },
  ContactListUpdated: { category: 'contactLists', version: 1 },
  ContactListDeleted: { category: 'contactLists', version: 1 },
  CampaignCreated: { category: 'campaign', version: 1 },
  CampaignSendStarted: { category: 'campaign', version: 1 },
  CampaignProgressed: { category: 'campaign', version: 1 },
  CampaignSendCompleted: { category: 'campaign', version: 1 },
  CampaignCancelled: { category: 'campaign', version: 1 },
  CampaignScheduled: { category: 'campaign', version: 1 },
  CampaignUpdated: { category: 'campaign', version: 1 },
  CampaignScheduledStartFailed: { category: 'campaign', version: 1 },
  CampaignDeleted: { category: 'campaign', version: 1 },
  ContactAdded: { category: 'contact', version: 1 },
  ContactRemoved: { category: 'contact', version: 1 },
  ContactUnsubscribed: { category: 'contact', version: 1 },
  ContactUpdated: { category: 'contact', version: 1 },
  EmailOpened: { category: 'tracking', version: 1 },
  LinkClicked: { category: 'tracking', version: 1 },
  SuppressionAdded: { category: 'suppression', version: 1 },
  SuppressionLifted: { category: 'suppression', version: 1 },
  BlockSuppressionLifted: { category: 'blockSuppression', version: 1 },
};

/** A typed event as the domain sees it (what deciders return and evolve folds). */
export type DomainEvent<T extends EventType = EventType> = T extends EventType ? { type: T; data: EventCatalogue[T] } : never;

export const isEventType = (t: string): t is EventType => Object.prototype.hasOwnProperty.call(EVENT_TYPES, t);

/** Narrows a recorded event to a typed one when its type is in the catalogue. */
export function asDomainEvent(e: { type: string; data: unknown }): DomainEvent | null {
  return isEventType(e.type) ? ({ type: e.type, data: e.data } as DomainEvent) : null;
}

/** Builds the EventData to append for a domain event (id given by the caller: stable ids make retries harmless). */
export function toEventData<T extends EventType>(id: string, event: DomainEvent<T>, metadata?: Record<string, unknown>) {
  return { id, type: event.type, version: EVENT_TYPES[event.type].version, data: event.data, metadata };
}
