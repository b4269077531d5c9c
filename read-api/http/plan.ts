import { planOf } from '../../infra/config';
import type { HttpContext } from './context';

/** Retention window in days of the account's plan (the default plan's when there is no account). */
export async function retentionDaysOfAccount(ctx: HttpContext, accountId: string | null): Promise<number> {
  const account = accountId === null ? null : await ctx.directory.account(accountId);
  return planOf(ctx.config, account?.plan ?? null).plan.retentionDays;
}
