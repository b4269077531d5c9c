import { createServer, type AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { expect } from 'chai';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { CLIENT_DOCUMENT_ENV, startClientDocumentHost, type ClientDocumentHost } from '../support/clientDocumentHost';
import { startTestMotor, type TestMotor } from '../support/motor';
import { dashboardUser, formTokenOf, getPage, postForm } from './support';

const CALLBACK = 'http://127.0.0.1:33419/callback';

const freePort = () => new Promise<number>((resolve, reject) => {
  const s = createServer();
  s.on('error', reject);
  s.listen(0, '127.0.0.1', () => {
    const { port } = s.address() as AddressInfo;
    s.close(() => resolve(port));
  });
});

/**
 * Interoperability: the MCP SDK's own OAuth client, as an agent runs it, against Motor. It finds
 * the protected-resource metadata from the 401, the authorization server from that, identifies
 * itself by its client metadata document URL (no registration), authorizes with PKCE S256 and the
 * `resource`, exchanges the code and calls a tool. The browser's part (the signed-in user's consent)
 * is played by the test.
 */
describe('OAuth 2.1 agent flow with the MCP SDK client (e2e)', function () {
  this.timeout(60_000);
  let motor: TestMotor;
  let host: ClientDocumentHost;
  let b: BootstrapResult;
  let user: Awaited<ReturnType<typeof dashboardUser>>;

  before(async () => {
    host = await startClientDocumentHost();
    // The public URLs must be where the SDK reaches this Motor: a port chosen before it starts.
    const port = await freePort();
    const self = `http://127.0.0.1:${port}`;
    motor = await startTestMotor({ port, roles: ['api', 'projector'], env: { ANONYMOUS_REQUEST_LIMIT: '100000', MCP_PUBLIC_URL: self, AUTH_PUBLIC_URL: self, ...CLIENT_DOCUMENT_ENV } });
    b = await motor.bootstrap();
    user = await dashboardUser(motor, b.accountId);
  });
  after(async () => {
    await motor?.close();
    await host?.close();
  });

  it('discovers, authorizes with PKCE and a metadata-document client id, gets a token and calls a tool', async () => {
    const clientId = `${host.origin}/sdk-agent.json`;
    host.docs.set('/sdk-agent.json', { client_id: clientId, client_name: 'SDK agent', redirect_uris: [CALLBACK], token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'] });

    let clientInformation: OAuthClientInformationMixed | undefined;
    let tokens: OAuthTokens | undefined;
    let verifier = '';
    let authorizationUrl: URL | null = null;
    const provider: OAuthClientProvider = {
      get redirectUrl() { return CALLBACK; },
      clientMetadataUrl: clientId,
      get clientMetadata(): OAuthClientMetadata { return { client_name: 'SDK agent', redirect_uris: [CALLBACK], token_endpoint_auth_method: 'none' }; },
      clientInformation: () => clientInformation,
      saveClientInformation: (info) => { clientInformation = info; },
      tokens: () => tokens,
      saveTokens: (t) => { tokens = t; },
      redirectToAuthorization: (url) => { authorizationUrl = url; },
      saveCodeVerifier: (v) => { verifier = v; },
      codeVerifier: () => verifier,
    };
    const url = new URL(`${motor.baseUrl}/v1/service_analytics/mcp`);

    const first = new StreamableHTTPClientTransport(url, { authProvider: provider });
    const refused = await new Client({ name: 'sdk-agent', version: '1.0.0' }).connect(first).then(() => null, (e: unknown) => e);
    expect(refused).to.be.instanceOf(UnauthorizedError);
    expect(clientInformation?.client_id, 'no registration: the document URL is the client id').to.equal(clientId);

    // What the SDK asked for: our authorize endpoint, PKCE S256, the resource and the server's scope.
    const asked = authorizationUrl as URL | null;
    expect(asked).to.not.equal(null);
    expect(`${asked!.origin}${asked!.pathname}`).to.equal(`${motor.baseUrl}/api/oauth2/authorize`);
    expect(asked!.searchParams.get('code_challenge_method')).to.equal('S256');
    expect(asked!.searchParams.get('resource')).to.equal(url.toString());
    expect(asked!.searchParams.get('scope')).to.equal('read:analytics');

    // The browser: the signed-in user approves on the consent page.
    const auth = { authorization: `Bearer ${user.token}` };
    const page = await getPage(asked!.toString(), auth);
    expect(page.status, page.text).to.equal(200);
    expect(page.text).to.include('SDK agent');
    const decision = await postForm(`${motor.baseUrl}/api/oauth2/consent`, { form_token: formTokenOf(page.text), decision: 'approve' }, auth);
    expect(decision.status).to.equal(302);
    const code = new URL(decision.location!).searchParams.get('code')!;

    await first.finishAuth(code);
    expect(tokens?.access_token).to.be.a('string');
    expect(tokens?.refresh_token).to.match(/^ort_/);

    const client = new Client({ name: 'sdk-agent', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(url, { authProvider: provider }));
    const listed = await client.listTools();
    expect(listed.tools.map((t) => t.name)).to.include('list_motor_blocks');
    const r = await client.callTool({ name: 'list_motor_blocks', arguments: {} });
    expect(r.isError ?? false).to.equal(false);
    expect(JSON.stringify(r.content)).to.include(b.motorBlockId);
    await client.close();
  });
});
