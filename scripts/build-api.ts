/**
 * Generates the tsoa routes and the OpenAPI document (read-api/generated/), then converts tsoa's
 * OpenAPI 3.0 output to the 3.1.0 document the spec requires (read-api/openapi31.ts).
 * Run by `npm start` and `npm test` before anything else.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateSpecAndRoutes } from '@tsoa/cli';
import { toOpenApi31 } from '../read-api/openapi31';

async function main(): Promise<void> {
  const root = join(__dirname, '..');
  process.chdir(root);
  await generateSpecAndRoutes({ configuration: 'tsoa.json' });
  const out = join(root, 'read-api', 'generated');
  const spec31 = toOpenApi31(JSON.parse(readFileSync(join(out, 'swagger.json'), 'utf8')));
  writeFileSync(join(out, 'openapi.json'), JSON.stringify(spec31, null, 2));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
