/**
 * The log followers of the worker role, by name: each name is the follower's lease
 * (`motor.follower:<name>`, infra/eventstore/followerLease.ts) and its row in
 * motor_workers.checkpoints. Here, apart from the followers themselves, so that
 * `npm run cli -- status` can list their leases without loading what they do.
 */
export const DELIVERY_ENQUEUER = 'delivery-enqueuer';
export const BLOCK_DELETION_ENQUEUER = 'block-deletion-enqueuer';
export const EXPORT_ENQUEUER = 'export-enqueuer';
export const CAMPAIGN_ENQUEUER = 'campaign-enqueuer';
export const WEBHOOK_DISPATCHER = 'webhook-dispatcher';
export const WEBHOOK_PAUSE_NOTIFIER = 'webhook-pause-notices';

/** Every follower a worker process starts, in the order it starts them. */
export const LOG_FOLLOWERS = [
  DELIVERY_ENQUEUER, BLOCK_DELETION_ENQUEUER, WEBHOOK_DISPATCHER, WEBHOOK_PAUSE_NOTIFIER, EXPORT_ENQUEUER, CAMPAIGN_ENQUEUER,
] as const;
