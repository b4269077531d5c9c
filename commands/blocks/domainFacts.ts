import type { EventStore } from '../../domain/eventStore';
import { streamName } from '../../domain/eventStore';
import { isUuid } from '../../domain/ids';
import type { DomainFacts } from '../../domain/motorBlock/motorBlock';
import { SENDING_DOMAIN_EVENTS, fold, type SendingDomainEvent } from '../../domain/sendingDomain/sendingDomain';
import { eventsOf } from '../decideOnStream';

/**
 * What the block decider needs to know about a sending domain, folded from the domain's own
 * stream with the domain aggregate's fold (commands decide on streams, never on read models).
 */
export async function readDomainFacts(store: EventStore, domainId: string): Promise<DomainFacts | null> {
  if (!isUuid(domainId)) return null;
  const recorded = await store.readStream(streamName('sendingDomain', domainId.toLowerCase()));
  const s = fold(eventsOf<SendingDomainEvent>(recorded, SENDING_DOMAIN_EVENTS));
  if (!s.exists) return null;
  return {
    id: s.domainId, accountId: s.accountId, name: s.name, ownershipVerified: s.ownershipVerified,
    spfConfigured: s.spfConfigured, dkimConfigured: s.dkimConfigured, sandbox: s.sandbox,
  };
}
