import pino, { type Logger } from 'pino';

export type { Logger };

/** Structured JSON logs on stdout (or `destination`); request ids are bound per request by the HTTP edge. */
export function createLogger(level: string, base: Record<string, unknown> = {}, destination?: pino.DestinationStream): Logger {
  const options = { level, base: { service: 'motor', ...base }, timestamp: pino.stdTimeFunctions.isoTime };
  return destination ? pino(options, destination) : pino(options);
}
