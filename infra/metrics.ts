import client from 'prom-client';

/**
 * Prometheus metrics (served at /metrics). One registry per process; every component records
 * through this object rather than importing prom-client itself.
 */
export function createMetrics() {
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry });
  const m = {
    registry,
    sendsAccepted: new client.Counter({ name: 'motor_sends_accepted_total', help: 'Sends accepted (HTTP, SMTP and agent tools)', labelNames: ['source'] as const, registers: [registry] }),
    sendsRefused: new client.Counter({ name: 'motor_sends_refused_total', help: 'Sends refused, by error code', labelNames: ['source', 'code'] as const, registers: [registry] }),
    deliveries: new client.Counter({ name: 'motor_deliveries_total', help: 'Recipient delivery attempts by outcome', labelNames: ['outcome'] as const, registers: [registry] }),
    mcpToolCalls: new client.Counter({ name: 'motor_mcp_tool_calls_total', help: 'Agent tool calls (MCP) by tool and outcome (ok, or the error code)', labelNames: ['tool', 'outcome'] as const, registers: [registry] }),
    webhookAttempts: new client.Counter({ name: 'motor_webhook_attempts_total', help: 'Webhook delivery attempts by outcome (delivered, retrying, failed)', labelNames: ['outcome'] as const, registers: [registry] }),
    webhookEndpointsPaused: new client.Counter({ name: 'motor_webhook_endpoints_paused_total', help: 'Webhook endpoints the worker paused because their deliveries kept failing (WEBHOOK_DISABLE_AFTER_DAYS)', registers: [registry] }),
    webhookPauseNotices: new client.Counter({ name: 'motor_webhook_pause_notices_total', help: 'Mails to account owners about endpoints paused for failing, by outcome (sent, skipped, failed)', labelNames: ['outcome'] as const, registers: [registry] }),
    inboundReports: new client.Counter({
      name: 'motor_inbound_reports_total',
      help: 'Messages to the bounce domain by kind (dsn, arf, other; none: a recipient refused at RCPT; unknown: not read) and result (recorded, ignored, no_message, refused_recipient, temporary_failure)',
      labelNames: ['kind', 'result'] as const, registers: [registry],
    }),
    httpBufferedBytes: new client.Gauge({
      name: 'motor_http_buffered_bytes',
      help: 'Bytes of request bodies this API process is reading or holding, by their declared length (HTTP_MAX_BUFFERED_BYTES caps them)',
      registers: [registry],
    }),
    httpBodyRefusals: new client.Counter({
      name: 'motor_http_body_refusals_total',
      help: 'Requests refused 503 server_busy because HTTP_MAX_BUFFERED_BYTES was reached',
      registers: [registry],
    }),
    smtpBufferedBytes: new client.Gauge({
      name: 'motor_smtp_buffered_bytes',
      help: 'Bytes of messages held in memory while they arrive over SMTP (submission and inbound listeners of the process; SMTP_MAX_BUFFERED_BYTES caps them)',
      registers: [registry],
    }),
    smtpBufferRefusals: new client.Counter({
      name: 'motor_smtp_buffer_refusals_total',
      help: 'Messages refused 452 4.3.1 because SMTP_MAX_BUFFERED_BYTES was reached, by listener (submission, inbound) and stage (mail_from: the declared SIZE did not fit; data: the bytes did not)',
      labelNames: ['listener', 'stage'] as const, registers: [registry],
    }),
    httpDuration: new client.Histogram({
      name: 'motor_http_request_duration_seconds', help: 'HTTP request latency', labelNames: ['method', 'route', 'status'] as const,
      buckets: [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5], registers: [registry],
    }),
    deliveryDuration: new client.Histogram({
      name: 'motor_delivery_attempt_duration_seconds', help: 'Time of one delivery attempt (all recipients of a message)',
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30], registers: [registry],
    }),
    deliveryConnectionWaits: new client.Counter({
      name: 'motor_delivery_connection_waits_total',
      help: 'Delivery sessions that waited for a place because DELIVERY_MAX_CONNECTIONS_PER_ADDRESS connections to their server address were open',
      registers: [registry],
    }),
    deliveryConnectionGiveUps: new client.Counter({
      name: 'motor_delivery_connection_give_ups_total',
      help: 'Delivery sessions that gave up on a full server address (reason: queue, stalled, timeout; DELIVERY_MAX_ADDRESS_WAIT_SECONDS)',
      labelNames: ['reason'] as const, registers: [registry],
    }),
    deliveryBufferedBytes: new client.Gauge({
      name: 'motor_delivery_buffered_bytes',
      help: 'Content bytes of the messages this worker process is delivering (DELIVERY_MAX_BUFFERED_BYTES caps them; building and sending holds a few times that)',
      registers: [registry],
    }),
    deliveryBufferWaits: new client.Counter({
      name: 'motor_delivery_buffer_waits_total',
      help: 'Delivery rounds that waited for room under DELIVERY_MAX_BUFFERED_BYTES before they started',
      registers: [registry],
    }),
    deliverySuppressed: new client.Counter({
      name: 'motor_delivery_suppressed_total',
      help: 'Recipients not attempted because they are on their Motor Block\'s suppression list (recorded failed; docs/DELIVERY.md "Suppressions")',
      registers: [registry],
    }),
    deliveryMtaSts: new client.Counter({
      name: 'motor_delivery_mta_sts_total',
      help: 'MTA-STS in direct delivery, by result: fetched (a policy fetched), cached (a kept policy applied), fetch_failed (no policy could be fetched), enforced_refusal (an enforce policy refused an MX host in a delivery to a domain), testing_would_fail (a testing policy would have refused a delivery made)',
      labelNames: ['result'] as const, registers: [registry],
    }),
    queueDepth: new client.Gauge({ name: 'motor_delivery_queue_depth', help: 'Jobs waiting or delayed in the delivery queue', labelNames: ['state'] as const, registers: [registry] }),
    logFollowerLeader: new client.Gauge({
      name: 'motor_log_follower_leader',
      help: 'Log followers (enqueuers, webhook dispatcher, pause notices): 1 while this process holds the follower\'s lease and follows the log, 0 while it stands by',
      labelNames: ['follower'] as const, registers: [registry],
    }),
    projectionLeader: new client.Gauge({
      name: 'motor_projection_leader',
      help: 'Projections: 1 while this process holds the projection\'s lease and applies its batches, 0 while it stands by',
      labelNames: ['projection'] as const, registers: [registry],
    }),
    projectionLagEvents: new client.Gauge({ name: 'motor_projection_lag_events', help: 'Events not yet applied, per projection', labelNames: ['projection'] as const, registers: [registry] }),
    projectionLagSeconds: new client.Gauge({ name: 'motor_projection_lag_seconds', help: 'Age of the newest applied event at apply time', labelNames: ['projection'] as const, registers: [registry] }),
    projectionSkipped: new client.Counter({ name: 'motor_projection_skipped_events_total', help: 'Events a projection did not handle', labelNames: ['projection'] as const, registers: [registry] }),
    readYourWritesTimeouts: new client.Counter({
      name: 'motor_read_your_writes_timeouts_total', help: 'Writes answered before the read model they are read from showed them: read-your-writes waits that gave up, by projection and wait (commands/readYourWrites.ts)',
      labelNames: ['projection', 'wait'] as const, registers: [registry],
    }),
    projectionHeadWaitTimeouts: new client.Counter({
      name: 'motor_projection_head_wait_timeouts_total', help: 'Decisions that waited for a read model to reach the log\'s head and gave up, by projection and wait (webhook.pause: a failing endpoint not paused; block.delete_history: a DELETE without history answered 503 history_unknown)',
      labelNames: ['projection', 'wait'] as const, registers: [registry],
    }),
    trackingHits: new client.Counter({
      name: 'motor_tracking_hits_total', help: 'Campaign open-pixel and click requests by type (open, click) and outcome (recorded, not_recorded: the store failed or timed out, invalid_token, skipped: HEAD, prefetch or a gone block, limited: past TRACKING_HITS_PER_MINUTE for the message)',
      labelNames: ['type', 'outcome'] as const, registers: [registry],
    }),
    /**
     * The text /metrics serves: this registry; in a child of API_PROCESSES, the whole cluster's,
     * added up by the primary (scripts/roleWorker.ts replaces it).
     */
    exposition: (): Promise<string> => registry.metrics(),
  };
  return m;
}

export type Metrics = ReturnType<typeof createMetrics>;
