import { randomBytes } from 'node:crypto';
import { streamName } from '../../domain/eventStore';
import { toEventData, type DomainEvent } from '../../domain/events';
import { newId } from '../../domain/ids';
import { catchUpUntil } from '../../scripts/runtime';
import { ProjectionRunner } from '../../projections/runner';
import { directoryProjection } from '../../projections/directory/projection';
import { getBlock } from '../../projections/directory/queries';
import type { TestMotor } from '../support/motor';

/** A verified domain (trusted DNS) and an active block in an existing account, as events; directory caught up. */
export async function createBlockFor(motor: TestMotor, accountId: string): Promise<{ motorBlockId: string; domainId: string; domain: string }> {
  const domainId = newId();
  const motorBlockId = newId();
  const domain = `d${randomBytes(4).toString('hex')}.example.test`;
  const at = new Date().toISOString();
  const append = (stream: string, events: DomainEvent[]) => motor.rt.store.append(stream, events.map((e) => toEventData(newId(), e)), { expectedRevision: 'no_stream' });
  await append(streamName('sendingDomain', domainId), [
    { type: 'DomainAdded', data: { domainId, accountId, name: domain, dkimSelector: 's', dkimAlgorithm: 'rsa-sha256', dkimPublicKey: 'x', dkimKeyId: newId(), addedAt: at } },
    { type: 'DomainOwnershipVerified', data: { domainId, method: 'trusted', verifiedAt: at } },
    { type: 'DomainDnsChecked', data: { domainId, method: 'trusted', spfConfigured: true, dkimConfigured: true, dmarcConfigured: true, checkedAt: at } },
  ]);
  await append(streamName('motorBlock', motorBlockId), [{ type: 'MotorBlockCreated', data: {
    motorBlockId, accountId, name: 'test', type: 'general_purpose', domainId, smtpUsername: `mb_${randomBytes(6).toString('hex')}`, authMethod: 'smtp_password', createdAt: at,
  } }]);
  await catchUpUntil(new ProjectionRunner(motor.rt.db, motor.rt.store, directoryProjection), async () => (await getBlock(motor.rt.db, motorBlockId)) !== null);
  return { motorBlockId, domainId, domain };
}
