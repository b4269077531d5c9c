import type { Request as ExpressRequest } from 'express';
import { Body, Controller, Get, Header, Post, Request, Response, Route, Security, SuccessResponse, Tags } from 'tsoa';
import { fail, isDomainError } from '../../domain/errors';
import { ctxOf, principalOf } from '../../read-api/http/context';
import { unavailableCode } from '../../read-api/http/errors';
import type { PrincipalOf } from '../../read-api/http/principal';
import { isIdempotencyKey, MAX_IDEMPOTENCY_KEY, sendMessage } from '../send/sendMessage';
import { testEmail, type TestEmailResult } from '../send/testEmail';
import { acceptedData, dryRunData, type DryRunData, type SendAcceptedData } from '../send/sendResult';

/** Body of POST /v1/send (SPEC "Send API"). */
export interface SendRequest {
  /** Bare address; its domain must equal the block's verified domain. */
  from: string;
  /** Display name, max 78 characters. */
  fromName?: string;
  to: string | string[];
  subject: string;
  text?: string;
  html?: string;
  /** Custom headers (DKIM-signed). Reserved names are refused with DISALLOWED_HEADERS. */
  headers?: { [name: string]: string };
  /** Up to 20 key/value pairs (values stored as strings, max 256 chars), searchable in logs as metadata.<key>:<value>. */
  metadata?: { [key: string]: string | number | boolean };
  /** Validate everything and create nothing. */
  dryRun?: boolean;
}

export interface SendAcceptedResponse {
  success: true;
  /** Present (true) when the Idempotency-Key matched a send of the last 24 hours. */
  idempotent?: true;
  data: SendAcceptedData;
  message: string;
}
export interface DryRunResponse { success: true; dryRun: true; data: DryRunData; message: string }

export interface ErrorResponse {
  success: false;
  error: string;
  code: string;
  message: string;
  nextAction?: string;
  retryAfterSeconds?: number;
}

/** POST /v1/test-email's body (SPEC "Send API"). */
export interface TestEmailBody {
  /** `starttls` (default), `ssl` or `tls` (implicit TLS), or `none`. */
  method?: string;
  /** This service's SMTP host (SMTP_PUBLIC_HOST); no other host is contacted. */
  host: string;
  /**
   * One of this service's SMTP ports (SMTP_PUBLIC_PORTS: by default 2587 STARTTLS, 2465 implicit TLS); no other port is contacted.
   * @isInt
   * @minimum 1
   * @maximum 65535
   */
  port: number;
  /** The SMTP username of the API key's Motor Block. */
  username: string;
  password: string;
  /** Where the test message goes (the block's sending rules apply). */
  to: string;
  /** Default `Motor SMTP test`. */
  subject?: string;
  /** With starttls: refuse to go on without TLS (default true). */
  requireTLS?: boolean;
}
export interface TestEmailResponse { success: true; data: TestEmailResult; message: string }

export interface StatusResponse {
  success: boolean;
  status: 'operational' | 'degraded';
  version: string;
  components: { [name: string]: { ok: boolean; latencyMs?: number; error?: string } };
  timestamp: string;
}


@Route('v1')
@Tags('Send')
export class SendController extends Controller {
  /**
   * Accepts a message for delivery (or validates it with dryRun). The 200 is returned only once the
   * MessageAccepted event is durably committed; the outcome is then read from the message status.
   */
  @Post('send')
  @Security('blockApiKey')
  @SuccessResponse(200, 'Accepted for delivery, or validated (dryRun)')
  @Response<ErrorResponse>(400, 'DISALLOWED_HEADERS or malformed JSON')
  @Response<ErrorResponse>(401, 'Invalid API key format')
  @Response<ErrorResponse>(403, 'From address domain does not match, DOMAIN_DNS_INCOMPLETE, use_comms_api, motor_block_inactive')
  @Response<ErrorResponse>(422, 'Validation error; recipients_exceed_limit (more recipients than a send quota ceiling allows: split the send)')
  @Response<ErrorResponse>(429, 'rate_limited_block, rate_limited_account or rate_limited_warmup (send quota); rate_limited (API request limit)')
  @Response<ErrorResponse>(503, 'event_store_unavailable: nothing was accepted')
  public async send(
    @Request() req: ExpressRequest,
    @Body() body: SendRequest,
    @Header('Idempotency-Key') idempotencyKey?: string,
  ): Promise<SendAcceptedResponse | DryRunResponse> {
    const ctx = ctxOf(req);
    const principal = principalOf<PrincipalOf<'blockApiKey'>>(req);
    if (idempotencyKey !== undefined && !isIdempotencyKey(idempotencyKey)) {
      throw fail('validation_error', 422, `Idempotency-Key must be 1 to ${MAX_IDEMPOTENCY_KEY} visible ASCII characters`, { details: { field: 'Idempotency-Key' } });
    }
    const now = ctx.clock.now();
    let result;
    try {
      result = await sendMessage(
        { store: ctx.store, directory: ctx.directory, quota: ctx.quota, config: ctx.config },
        { motorBlockId: principal.motorBlockId, body, idempotencyKey: idempotencyKey ?? null, source: 'http', now },
      );
    } catch (err) {
      const code = isDomainError(err) ? err.code : unavailableCode(err, ctx.config.eventstoreUrl) ?? 'internal_error';
      ctx.metrics.sendsRefused.inc({ source: 'http', code });
      throw err;
    }
    switch (result.kind) {
      case 'validated':
        return { success: true, dryRun: true, data: dryRunData(result, now), message: 'Validation passed; nothing was queued, logged or charged' };
      case 'replayed':
        return { success: true, idempotent: true, data: acceptedData(result), message: 'Idempotency-Key matched an earlier send; nothing new was queued' };
      case 'accepted': {
        ctx.metrics.sendsAccepted.inc({ source: 'http' });
        if (result.quota.kind === 'allowed') {
          // The effective daily ceiling, warm-up cap included: the daily bucket GET .../rate-limits shows.
          const daily = result.quota.effectiveDaily;
          this.setHeader('RateLimit-Limit', String(daily.limit));
          this.setHeader('RateLimit-Remaining', String(daily.remaining));
          this.setHeader('RateLimit-Reset', String(daily.resetIn));
        }
        return { success: true, data: acceptedData(result), message: 'Message accepted for delivery; read its outcome with GET /api/public/v1/messages/{id}' };
      }
    }
  }

  /**
   * Checks SMTP settings by using them: connects to this service's SMTP host with the given
   * method, port and credentials, then sends one real test message through the SMTP path (quota,
   * rules, logs and delivery as for any message). 200 whether or not the check passed: `data.ok`
   * and `data.failedStage` (connect, tls, auth, send) say how it went. docs/SMTP.md.
   */
  @Post('test-email')
  @Security('blockApiKey')
  @Response<ErrorResponse>(401, 'Invalid API key')
  @Response<ErrorResponse>(422, 'validation_error, smtp_host_not_allowed, smtp_port_not_allowed, smtp_username_mismatch')
  public async testEmail(@Request() req: ExpressRequest, @Body() body: TestEmailBody): Promise<TestEmailResponse> {
    const ctx = ctxOf(req);
    const principal = principalOf<PrincipalOf<'blockApiKey'>>(req);
    // The caller's address (req.ip: X-Forwarded-For from a trusted proxy) is where its failed logins count.
    const data = await testEmail({ directory: ctx.directory, config: ctx.config, smtpAuth: ctx.smtpAuth }, principal.motorBlockId, body as unknown as Record<string, unknown>, req.ip ?? req.socket.remoteAddress ?? 'unknown');
    return {
      success: true, data,
      message: data.ok ? 'The SMTP settings work: the test message was accepted' : `The SMTP settings failed at ${data.failedStage}: ${data.error}`,
    };
  }

  /** Health of the send API and its dependencies (event store, Redis, delivery queue). No credential. */
  @Get('status')
  @Response<StatusResponse>(503, 'A dependency is down')
  public async status(@Request() req: ExpressRequest): Promise<StatusResponse> {
    const ctx = ctxOf(req);
    const report = await ctx.health();
    if (!report.ok) this.setStatus(503);
    return {
      success: report.ok,
      status: report.ok ? 'operational' : 'degraded',
      version: '1.2.0',
      components: report.components,
      timestamp: ctx.clock.now().toISOString(),
    };
  }
}
