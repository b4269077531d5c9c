import { expect } from 'chai';
import { isDomainError } from '../../domain/errors';
import type { MotorBlockCreated } from '../../domain/events';
import { accountGrantId, covers, grantOf } from '../../domain/motorBlock/grant';
import {
  decide, fold, type CreateMotorBlock, type DomainFacts, type MotorBlockCommand, type MotorBlockEvent,
} from '../../domain/motorBlock/motorBlock';

/**
 * The Motor Block decider, one test per row of the SPEC table "Motor Block lifecycle, sandbox,
 * recipients, send acceptance" that concerns blocks, written given(events).when(command).then(...).
 *
 * The other rows are tested elsewhere: "sandbox block → convert", "no sandbox → provision" and the
 * free-recipient rows (absent → pending, pending → confirmed, → removed) in the sandbox engineer's
 * test/sandbox/deciders.unit.test.ts, sandbox.int.test.ts and freeRecipients.int.test.ts; the send
 * rows (real send, dryRun) in test/domain/sendRules.unit.test.ts and test/e2e/send.e2e.test.ts.
 */

const T0 = new Date('2026-11-22T10:00:00Z');
const ACCOUNT = '0b6f1a52-3b7e-4d0a-9a43-2f6e8b1c5d70';
const OTHER = '1c7f1a52-3b7e-4d0a-9a43-2f6e8b1c5d71';
const BLOCK = '2d8f1a52-3b7e-4d0a-9a43-2f6e8b1c5d72';
const DOMAIN = '3e9f1a52-3b7e-4d0a-9a43-2f6e8b1c5d73';
const DOMAIN2 = '4fa01a52-3b7e-4d0a-9a43-2f6e8b1c5d74';
const JOB = '5ab11a52-3b7e-4d0a-9a43-2f6e8b1c5d75';

const verified = (over: Partial<DomainFacts> = {}): DomainFacts => ({
  id: DOMAIN, accountId: ACCOUNT, name: 'example.com', ownershipVerified: true, spfConfigured: true, dkimConfigured: true, sandbox: false, ...over,
});

const created = (over: Partial<MotorBlockCreated> = {}): MotorBlockEvent => ({
  type: 'MotorBlockCreated',
  data: {
    motorBlockId: BLOCK, accountId: ACCOUNT, name: 'Shop', type: 'general_purpose', domainId: DOMAIN, smtpUsername: 'mb_abc',
    authMethod: 'smtp_password', grantId: accountGrantId(ACCOUNT), idempotencyKey: 'k', inputFingerprint: 'fp1', createdAt: T0.toISOString(), ...over,
  },
});
const deactivated: MotorBlockEvent = { type: 'MotorBlockDeactivated', data: { motorBlockId: BLOCK, at: T0.toISOString() } };
const deletionRequested = (deleteHistory = true): MotorBlockEvent => ({
  type: 'MotorBlockDeletionRequested', data: { motorBlockId: BLOCK, accountId: ACCOUNT, jobId: JOB, deleteHistory, requestedAt: T0.toISOString() },
});

const create = (over: Partial<CreateMotorBlock['data']> = {}, context: Partial<CreateMotorBlock['context']> = {}): CreateMotorBlock => ({
  type: 'CreateMotorBlock',
  data: {
    motorBlockId: BLOCK, accountId: ACCOUNT, grantId: accountGrantId(ACCOUNT), name: 'Shop', blockType: 'general_purpose', description: null,
    domainId: DOMAIN, smtpUsername: 'mb_abc', idempotencyKey: 'k', inputFingerprint: 'fp1', now: T0, ...over,
  },
  context: { domain: verified(), liveBlocks: 0, maxBlocks: 5, nameTaken: false, bounceDomain: null, ...context },
});

/** given(events).when(command) → then(events) or thenFails(code). */
function given(...events: MotorBlockEvent[]) {
  return {
    when(command: MotorBlockCommand) {
      const run = () => decide(command, fold(events));
      return {
        then(expected: (out: MotorBlockEvent[]) => void) { expected(run()); },
        thenFails(code: string) {
          try {
            run();
          } catch (e) {
            expect(isDomainError(e), String(e)).to.equal(true);
            if (isDomainError(e)) expect(e.code).to.equal(code);
            return;
          }
          expect.fail(`expected ${code}`);
        },
      };
    },
  };
}
const types = (out: MotorBlockEvent[]) => out.map((e) => e.type);

describe('Motor Block decider (unit, given/when/then)', () => {
  describe('row "(none) → POST create block → active block"', () => {
    it('verified non-sandbox domain owned by the caller, within the plan limit, with a key → MotorBlockCreated in the caller\'s grant, active', () => {
      given().when(create()).then((out) => {
        expect(types(out)).to.deep.equal(['MotorBlockCreated']);
        const d = (out[0] as Extract<MotorBlockEvent, { type: 'MotorBlockCreated' }>).data;
        expect(d).to.include({ grantId: accountGrantId(ACCOUNT), authMethod: 'smtp_password', type: 'general_purpose', idempotencyKey: 'k' });
        const s = fold(out);
        expect(s?.status).to.equal('active');
        expect(covers(grantOf({ accountId: ACCOUNT }), s)).to.equal(true);
      });
    });
    it('same key and same input → no new event (the same block)', () => {
      given(created()).when(create()).then((out) => expect(out).to.deep.equal([]));
    });
    it('same key with a different input → idempotency_conflict', () => {
      given(created()).when(create({ inputFingerprint: 'fp2' })).thenFails('idempotency_conflict');
    });
    it('domain not verified (DNS incomplete) → domain_not_verified', () => {
      given().when(create({}, { domain: verified({ dkimConfigured: false }) })).thenFails('domain_not_verified');
      given().when(create({}, { domain: verified({ ownershipVerified: false }) })).thenFails('domain_not_verified');
    });
    it('sandbox domain → domain_not_verified', () => {
      given().when(create({}, { domain: verified({ sandbox: true }) })).thenFails('domain_not_verified');
    });
    it('domain of another account, or none → domain_not_found', () => {
      given().when(create({}, { domain: verified({ accountId: OTHER }) })).thenFails('domain_not_found');
      given().when(create({}, { domain: null })).thenFails('domain_not_found');
    });
    it('plan limit reached → motor_block_limit_reached', () => {
      given().when(create({}, { liveBlocks: 5, maxBlocks: 5 })).thenFails('motor_block_limit_reached');
    });
    it('name already used in the account → motor_block_name_conflict', () => {
      given().when(create({}, { nameTaken: true })).thenFails('motor_block_name_conflict');
    });
    it('a domain at or under the bounce domain (added before BOUNCE_DOMAIN was set) → domain_reserved, before its verification is looked at', () => {
      for (const name of ['bounces.example.com', 'mail.bounces.example.com', 'Mail.Bounces.Example.com.']) {
        given().when(create({}, { domain: verified({ name }), bounceDomain: 'bounces.example.com' })).thenFails('domain_reserved');
      }
      given().when(create({}, { domain: verified({ name: 'bounces.example.com', ownershipVerified: false }), bounceDomain: 'bounces.example.com' })).thenFails('domain_reserved');
      // Of another account: not found, as any domain of another account.
      given().when(create({}, { domain: verified({ name: 'bounces.example.com', accountId: OTHER }), bounceDomain: 'bounces.example.com' })).thenFails('domain_not_found');
    });
    it('the parent and a sibling of the bounce domain, or BOUNCE_DOMAIN unset → MotorBlockCreated', () => {
      for (const name of ['example.com', 'notbounces.example.com']) {
        given().when(create({}, { domain: verified({ name }), bounceDomain: 'bounces.example.com' })).then((out) => expect(types(out)).to.deep.equal(['MotorBlockCreated']));
      }
      given().when(create({}, { domain: verified({ name: 'bounces.example.com' }), bounceDomain: null })).then((out) => expect(types(out)).to.deep.equal(['MotorBlockCreated']));
    });
  });

  describe('row "active → deactivate → inactive"', () => {
    it('confirm true → MotorBlockDeactivated; the block is inactive (sends refused), nothing deleted', () => {
      given(created()).when({ type: 'DeactivateMotorBlock', data: { confirm: true, now: T0 } }).then((out) => {
        expect(types(out)).to.deep.equal(['MotorBlockDeactivated']);
        expect(fold([created(), ...out])?.status).to.equal('inactive');
      });
    });
    it('without confirm true → confirmation_required', () => {
      given(created()).when({ type: 'DeactivateMotorBlock', data: { confirm: false, now: T0 } }).thenFails('confirmation_required');
    });
    it('already inactive → nothing to do', () => {
      given(created(), deactivated).when({ type: 'DeactivateMotorBlock', data: { confirm: true, now: T0 } }).then((out) => expect(out).to.deep.equal([]));
    });
  });

  describe('row "inactive → reactivate → active"', () => {
    it('verified production domain and no deletion queued → MotorBlockReactivated', () => {
      given(created(), deactivated).when({ type: 'ReactivateMotorBlock', data: { now: T0 }, context: { domain: verified() } }).then((out) => {
        expect(types(out)).to.deep.equal(['MotorBlockReactivated']);
        expect(fold([created(), deactivated, ...out])?.status).to.equal('active');
      });
    });
    it('domain not a verified production domain → motor_block_domain_required', () => {
      given(created(), deactivated).when({ type: 'ReactivateMotorBlock', data: { now: T0 }, context: { domain: verified({ spfConfigured: false }) } })
        .thenFails('motor_block_domain_required');
      given(created(), deactivated).when({ type: 'ReactivateMotorBlock', data: { now: T0 }, context: { domain: verified({ sandbox: true }) } })
        .thenFails('motor_block_domain_required');
    });
    it('deletion queued → motor_block_delete_in_progress', () => {
      given(created(), deactivated, deletionRequested()).when({ type: 'ReactivateMotorBlock', data: { now: T0 }, context: { domain: verified() } })
        .thenFails('motor_block_delete_in_progress');
    });
  });

  describe('the operator: suspend and lift (cli block deactivate|reactivate)', () => {
    const suspend: MotorBlockCommand = { type: 'SuspendMotorBlock', data: { now: T0 } };
    const lift: MotorBlockCommand = { type: 'LiftMotorBlockSuspension', data: { now: T0 } };
    const suspended: MotorBlockEvent = { type: 'MotorBlockDeactivated', data: { motorBlockId: BLOCK, at: T0.toISOString(), byOperator: true } };
    it('an active block, of any type, is stopped by the operator: suspended, and the account cannot reactivate it', () => {
      for (const type of ['general_purpose', 'sandbox', 'portal'] as const) {
        given(created({ type })).when(suspend).then((out) => {
          expect(out).to.deep.equal([suspended]);
          expect(fold([created({ type }), ...out])).to.include({ status: 'inactive', suspended: true });
        });
      }
      given(created(), suspended).when({ type: 'ReactivateMotorBlock', data: { now: T0 }, context: { domain: verified() } }).thenFails('motor_block_suspended');
    });
    it('a block its account stopped becomes suspended; one suspended already: nothing to do', () => {
      given(created(), deactivated).when(suspend).then((out) => expect(out).to.deep.equal([suspended]));
      given(created(), suspended).when(suspend).then((out) => expect(out).to.deep.equal([]));
    });
    it('lift: suspended or stopped by the account → MotorBlockReactivated byOperator, no domain check; active: nothing to do', () => {
      const lifted = [{ type: 'MotorBlockReactivated', data: { motorBlockId: BLOCK, at: T0.toISOString(), byOperator: true } }];
      given(created(), suspended).when(lift).then((out) => {
        expect(out).to.deep.equal(lifted);
        expect(fold([created(), suspended, ...out])).to.include({ status: 'active', suspended: false });
      });
      given(created(), deactivated).when(lift).then((out) => expect(out).to.deep.equal(lifted));
      given(created()).when(lift).then((out) => expect(out).to.deep.equal([]));
    });
    it('a deletion queued → motor_block_delete_in_progress; no block → motor_block_not_found', () => {
      given(created(), deactivated, deletionRequested()).when(suspend).thenFails('motor_block_delete_in_progress');
      given(created(), deactivated, deletionRequested()).when(lift).thenFails('motor_block_delete_in_progress');
      given().when(suspend).thenFails('motor_block_not_found');
    });
  });

  describe('row "inactive → delete → deletion queued"', () => {
    const del = (over: Partial<{ confirm: boolean; deleteHistory: boolean }> = {}, historyPresent = false): MotorBlockCommand =>
      ({ type: 'DeleteMotorBlock', data: { confirm: true, deleteHistory: true, jobId: JOB, now: T0, ...over }, context: { historyPresent } });
    it('confirm true, deleteHistory true → MotorBlockDeletionRequested with the jobId (the 202 path)', () => {
      given(created(), deactivated).when(del({}, true)).then((out) => {
        expect(types(out)).to.deep.equal(['MotorBlockDeletionRequested']);
        const s = fold([created(), deactivated, ...out]);
        expect(s?.status).to.equal('deletion_queued');
        expect(s?.deletion).to.deep.equal({ jobId: JOB, deleteHistory: true, status: 'queued' });
      });
    });
    it('deleteHistory false without history → queued', () => {
      given(created(), deactivated).when(del({ deleteHistory: false }, false)).then((out) => expect(types(out)).to.deep.equal(['MotorBlockDeletionRequested']));
    });
    it('deleteHistory false while history exists → motor_block_history_present', () => {
      given(created(), deactivated).when(del({ deleteHistory: false }, true)).thenFails('motor_block_history_present');
    });
    it('active block → motor_block_must_be_inactive', () => {
      given(created()).when(del()).thenFails('motor_block_must_be_inactive');
    });
    it('without confirm true → confirmation_required', () => {
      given(created(), deactivated).when(del({ confirm: false })).thenFails('confirmation_required');
    });
    it('already queued → nothing new (the queued job answers)', () => {
      given(created(), deactivated, deletionRequested()).when(del()).then((out) => expect(out).to.deep.equal([]));
    });
    it('after the job gave up (MotorBlockDeletionFailed), a new DELETE queues a new job', () => {
      const failed: MotorBlockEvent = { type: 'MotorBlockDeletionFailed', data: { motorBlockId: BLOCK, jobId: JOB, reason: 'store down', at: T0.toISOString() } };
      const retry: MotorBlockCommand = { type: 'DeleteMotorBlock', data: { confirm: true, deleteHistory: true, jobId: 'new-job', now: T0 }, context: { historyPresent: true } };
      given(created(), deactivated, deletionRequested(), failed).when(retry).then((out) => {
        expect(types(out)).to.deep.equal(['MotorBlockDeletionRequested']);
        expect(fold([created(), deactivated, deletionRequested(), failed, ...out])?.deletion).to.deep.equal({ jobId: 'new-job', deleteHistory: true, status: 'queued' });
      });
    });
    it('the job: started, then the tombstone; the block is deleted and covered by no grant; steps repeat harmlessly', () => {
      const started: MotorBlockEvent = { type: 'MotorBlockDeletionStarted', data: { motorBlockId: BLOCK, jobId: JOB, at: T0.toISOString() } };
      given(created(), deactivated, deletionRequested()).when({ type: 'StartMotorBlockDeletion', data: { jobId: JOB, now: T0 } })
        .then((out) => expect(types(out)).to.deep.equal(['MotorBlockDeletionStarted']));
      given(created(), deactivated, deletionRequested(), started).when({ type: 'StartMotorBlockDeletion', data: { jobId: JOB, now: T0 } })
        .then((out) => expect(out).to.deep.equal([]));
      const complete: MotorBlockCommand = {
        type: 'CompleteMotorBlockDeletion', data: { jobId: JOB, historyDeleted: true, messagesDeleted: 2, streamsDeleted: 3, eventsDeleted: 9, now: T0 },
      };
      given(created(), deactivated, deletionRequested(), started).when(complete).then((out) => {
        expect(types(out)).to.deep.equal(['MotorBlockDeleted']);
        const s = fold([created(), deactivated, deletionRequested(), started, ...out]);
        expect(s?.status).to.equal('deleted');
        expect(covers(accountGrantId(ACCOUNT), s)).to.equal(false);
        given(created(), deactivated, deletionRequested(), started, ...out).when(complete).then((again) => expect(again).to.deep.equal([]));
      });
    });
    it('a deleted block is gone for every command → motor_block_not_found', () => {
      const tomb: MotorBlockEvent = {
        type: 'MotorBlockDeleted',
        data: { motorBlockId: BLOCK, accountId: ACCOUNT, jobId: JOB, historyDeleted: true, messagesDeleted: 0, streamsDeleted: 0, eventsDeleted: 0, deletedAt: T0.toISOString() },
      };
      given(created(), deactivated, deletionRequested(), tomb).when({ type: 'ReactivateMotorBlock', data: { now: T0 }, context: { domain: verified() } })
        .thenFails('motor_block_not_found');
      // A create repeated with the key and input of the deleted block too (it was "the same block", deleted);
      // another input with that key is still the key's conflict.
      given(created(), deactivated, deletionRequested(), tomb).when(create()).thenFails('motor_block_not_found');
      given(created(), deactivated, deletionRequested(), tomb).when(create({ inputFingerprint: 'fp2' })).thenFails('idempotency_conflict');
      // While the deletion is only queued, the repeat still answers the block (status deletion_queued).
      given(created(), deactivated, deletionRequested()).when(create()).then((out) => expect(out).to.deep.equal([]));
    });
  });

  describe('rename, change type, assign domain', () => {
    it('rename → MotorBlockRenamed; the SMTP username is unchanged', () => {
      given(created()).when({ type: 'RenameMotorBlock', data: { name: 'Billing', now: T0 }, context: { nameTaken: false } }).then((out) => {
        expect(types(out)).to.deep.equal(['MotorBlockRenamed']);
        const s = fold([created(), ...out]);
        expect(s).to.include({ name: 'Billing', smtpUsername: 'mb_abc' });
      });
    });
    it('rename to a name used by another block → motor_block_name_conflict', () => {
      given(created()).when({ type: 'RenameMotorBlock', data: { name: 'Billing', now: T0 }, context: { nameTaken: true } }).thenFails('motor_block_name_conflict');
    });
    it('change type with confirm → MotorBlockTypeChanged; without → confirmation_required', () => {
      given(created()).when({ type: 'ChangeMotorBlockType', data: { blockType: 'transactional', confirm: true, now: T0 } })
        .then((out) => expect(fold([created(), ...out])?.type).to.equal('transactional'));
      given(created()).when({ type: 'ChangeMotorBlockType', data: { blockType: 'transactional', confirm: false, now: T0 } }).thenFails('confirmation_required');
    });
    it('assign a verified domain with confirm → MotorBlockDomainAssigned', () => {
      given(created()).when({ type: 'AssignMotorBlockDomain', data: { domainId: DOMAIN2, confirm: true, now: T0 }, context: { domain: verified({ id: DOMAIN2 }), bounceDomain: null } })
        .then((out) => {
          expect(types(out)).to.deep.equal(['MotorBlockDomainAssigned']);
          expect(fold([created(), ...out])?.domainId).to.equal(DOMAIN2);
        });
    });
    it('assign: no confirm → confirmation_required; unverified → domain_not_verified; sandbox → domain_not_verified; other account → domain_not_found; at or under the bounce domain → domain_reserved', () => {
      const assign = (confirm: boolean, domain: DomainFacts | null, bounceDomain: string | null = null): MotorBlockCommand => ({
        type: 'AssignMotorBlockDomain', data: { domainId: DOMAIN2, confirm, now: T0 }, context: { domain, bounceDomain },
      });
      given(created()).when(assign(false, verified({ id: DOMAIN2 }))).thenFails('confirmation_required');
      given(created()).when(assign(true, verified({ id: DOMAIN2, ownershipVerified: false }))).thenFails('domain_not_verified');
      given(created()).when(assign(true, verified({ id: DOMAIN2, sandbox: true }))).thenFails('domain_not_verified');
      given(created()).when(assign(true, verified({ id: DOMAIN2, accountId: OTHER }))).thenFails('domain_not_found');
      given(created()).when(assign(true, verified({ id: DOMAIN2, name: 'mail.bounces.example.com' }), 'bounces.example.com')).thenFails('domain_reserved');
    });
    it('assign of the domain the block is on already, at or under the bounce domain → nothing to do (the block is not put on it anew)', () => {
      given(created({ domainId: DOMAIN2 })).when({
        type: 'AssignMotorBlockDomain', data: { domainId: DOMAIN2, confirm: true, now: T0 },
        context: { domain: verified({ id: DOMAIN2, name: 'mail.bounces.example.com' }), bounceDomain: 'bounces.example.com' },
      }).then((out) => expect(out).to.deep.equal([]));
    });
    it('changes while a deletion is queued → motor_block_delete_in_progress', () => {
      given(created(), deactivated, deletionRequested()).when({ type: 'RenameMotorBlock', data: { name: 'X', now: T0 }, context: { nameTaken: false } })
        .thenFails('motor_block_delete_in_progress');
    });
  });

  describe('block types the account routes refuse', () => {
    for (const type of ['sandbox', 'marketing', 'portal'] as const) {
      it(`a ${type} block → motor_block_type_not_allowed`, () => {
        given(created({ type })).when({ type: 'DeactivateMotorBlock', data: { confirm: true, now: T0 } }).thenFails('motor_block_type_not_allowed');
      });
    }
    it('a converted sandbox block (SandboxConverted folded) is a production block with its new name, type, domain and username', () => {
      const converted: MotorBlockEvent = {
        type: 'SandboxConverted',
        data: { motorBlockId: BLOCK, accountId: ACCOUNT, domainId: DOMAIN2, name: 'Prod', type: 'transactional', previousSmtpUsername: 'mb_abc', smtpUsername: 'mb_new', convertedAt: T0.toISOString() },
      };
      const s = fold([created({ type: 'sandbox' }), converted]);
      expect(s).to.include({ type: 'transactional', name: 'Prod', domainId: DOMAIN2, smtpUsername: 'mb_new', status: 'active' });
      given(created({ type: 'sandbox' }), converted).when({ type: 'DeactivateMotorBlock', data: { confirm: true, now: T0 } })
        .then((out) => expect(types(out)).to.deep.equal(['MotorBlockDeactivated']));
    });
  });
});
