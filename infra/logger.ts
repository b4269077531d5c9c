import pino, { type Logger } from 'pino';

export type { Logger };

/** Structured JSON logs on stdout; request ids are bound per request by the HTTP edge. */
export function createLogger(level: string, base: Record<string, unknown> = {}): Logger {
  return pino({ level, base: { service: 'motor', ...base }, timestamp: pino.stdTimeFunctions.isoTime });
}
