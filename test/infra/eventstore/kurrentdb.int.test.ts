import { KurrentEventStore } from '../../../infra/eventstore/kurrentdb/kurrentEventStore.js';
import { eventStoreContract } from './contract.js';

// Needs a KurrentDB/EventStoreDB server, e.g. EVENTSTORE_URL=kurrentdb://127.0.0.1:2113?tls=false.
// Without one the suite is not registered at all (not reported as skipped-but-green).
const url = process.env.EVENTSTORE_URL;

if (url) {
  eventStoreContract('KurrentDB', async () => ({
    open: async () => {
      const store = new KurrentEventStore(url);
      await store.init();
      return store;
    },
    // deleteStream is a soft delete: the events stay in $all until a scavenge.
    deletesPhysically: false,
    teardown: async () => undefined,
  }));
} else {
  console.log('KurrentDB event store contract NOT RUN: set EVENTSTORE_URL to run it.');
}
