import { fail } from '../../domain/errors';
import { effectiveAllowlist, refusedRecipients } from '../../domain/sandbox/sandbox';
import type { BlockRecord } from '../../projections/directory/queries';
import type { DirectoryCache } from '../directoryCache';

/**
 * The recipient rules of the send path (docs/SANDBOX.md), asked by checkSend after the sender
 * domain and DNS checks and before the quota, for HTTP and SMTP alike (dry runs included):
 *   - a sandbox block (type `sandbox`, i.e. not converted) reaches only its effective allowlist:
 *     the account owner's address plus the addresses set with PATCH /api/developer/sandbox/outbound;
 *   - an account on the `free` plan reaches only its own address and its confirmed free recipients.
 * Both answer 403 with the refused recipients listed; nothing is charged.
 */
export async function checkRecipientPermissions(directory: DirectoryCache, block: BlockRecord, to: readonly string[]): Promise<void> {
  if (to.length === 0) return;
  const account = await directory.account(block.accountId);
  if (block.type === 'sandbox') {
    const addresses = (await directory.sandboxAllowlist(block.id)) ?? [];
    const refused = refusedRecipients(to, effectiveAllowlist(account?.email ?? null, addresses));
    if (refused.length > 0) {
      throw fail('sandbox_recipient_not_allowed', 403, `This sandbox block may only send to its allowlist; refused: ${refused.join(', ')}`.slice(0, 900), {
        details: { refusedRecipients: refused },
        nextAction: 'Add the addresses with PATCH /api/developer/sandbox/outbound, or convert the sandbox onto a verified domain (POST /api/public/v1/account/sandbox/convert)',
      });
    }
  }
  if (account?.plan === 'free') {
    const confirmed = await directory.confirmedFreeRecipients(block.accountId);
    const refused = refusedRecipients(to, [account.email, ...confirmed]);
    if (refused.length > 0) {
      throw fail('recipient_not_permitted', 403, `A Free account sends only to its own address and to confirmed free recipients; refused: ${refused.join(', ')}`.slice(0, 900), {
        details: { refusedRecipients: refused },
        nextAction: 'Ask each recipient to confirm: POST /api/public/v1/account/free-recipients {"email": "..."}, then have them open the emailed link',
      });
    }
  }
}
