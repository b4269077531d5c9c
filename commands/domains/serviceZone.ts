import type { Knex } from 'knex';
import { managedDkimRecords } from '../../projections/directory/queries';

/**
 * The records the operator's DNS must serve for cname_managed domains (docs/DOMAINS.md
 * "cname_managed and key rotation"), as zone-file lines: `<name>. 300 IN TXT "<chunk>" "<chunk>"`
 * with each character-string at most 255 bytes (RFC 1035). Meant for a CLI command or a sync job.
 */
export function zoneLines(records: Array<{ name: string; value: string }>, ttlSeconds = 300): string[] {
  return records.map((r) => {
    const chunks: string[] = [];
    for (let i = 0; i < r.value.length; i += 255) chunks.push(`"${r.value.slice(i, i + 255).replace(/(["\\])/g, '\\$1')}"`);
    return `${r.name}. ${ttlSeconds} IN TXT ${chunks.join(' ')}`;
  });
}

export async function managedDkimZone(db: Knex, serviceDomain: string): Promise<string> {
  return zoneLines(await managedDkimRecords(db, serviceDomain)).join('\n');
}
