/**
 * The caller of a protected request, rebuilt from the database on every request so that
 * deactivation, scope removal, a workspace move or an inactive run-as membership take
 * effect on the very next request.
 */
import { AppError } from '../errors.ts';
import { isUuid } from '../ids.ts';
import type { Db } from '../db/connect.ts';
import type { Role } from '../db/tables.ts';
import { loadAccountById, type AccountRow } from './auth.sql.ts';
import { tokenExpired, verifyToken, type Scope, type TokenClaims } from './tokens.ts';

export interface Principal {
  credentialId: string;
  organizationId: string;
  workspaceId: string;
  membershipId: string;
  userId: string;
  role: Role;
  /** The token's scopes that the account still holds. */
  scopes: ReadonlySet<Scope>;
}

const BEARER_RE = /^Bearer ([\x21-\x7e]+)$/i;

function invalidToken(sent: boolean): AppError {
  return new AppError('unauthorized', sent ? 'The bearer token is invalid, expired or revoked' : 'A bearer token is required', {
    headers: { 'www-authenticate': sent ? 'Bearer error="invalid_token"' : 'Bearer' },
  });
}

/** The claims of a well-formed, correctly signed, unexpired bearer token; 401 otherwise. */
export function verifyBearer(signingKey: Buffer, authorization: string | undefined, nowSeconds: number): TokenClaims {
  if (!authorization) throw invalidToken(false);
  const match = BEARER_RE.exec(authorization);
  if (!match) throw invalidToken(true);
  const claims = verifyToken(signingKey, match[1]!, nowSeconds);
  if (!claims || !isUuid(claims.sub)) throw invalidToken(true);
  return claims;
}

export async function authenticate(db: Db, signingKey: Buffer, authorization: string | undefined, nowSeconds: number): Promise<Principal> {
  const claims = verifyBearer(signingKey, authorization, nowSeconds);
  return principalFromAccount(claims, await loadAccountById(db, claims.sub));
}

/**
 * What the token says about its caller, before the account is re-checked. Only for a
 * visibility clause that runs in the same statement as the re-check: principalFromAccount
 * then refuses the request unless the account still matches these claims. A token claims
 * no role, membership or user: such a clause reads only the account, organization and
 * workspace (a rule that depends on the role reads it in SQL, as credentials do).
 */
export function claimedPrincipal(claims: TokenClaims): Principal {
  return { credentialId: claims.sub, organizationId: claims.org, workspaceId: claims.ws, membershipId: '', userId: '', role: 'member', scopes: new Set() };
}

/**
 * Whether a service account may act at all, the one rule for the token exchange and the
 * per-request re-check: the account is active and its run-as membership is an active one
 * in the account's own organization.
 */
export function accountStanding(
  account: Pick<AccountRow, 'is_active' | 'organization_id' | 'membership_active' | 'membership_organization_id'>,
): 'active' | 'inactive' | 'membership_inactive' {
  if (!account.is_active || account.membership_organization_id !== account.organization_id) return 'inactive';
  return account.membership_active ? 'active' : 'membership_inactive';
}

/**
 * Whether the token still holds for the account as stored now: 'revoked' when the account
 * is gone or inactive, has moved, or revoked its tokens since this one was issued;
 * 'membership_inactive' when the token is still its own but the run-as membership may not
 * act. The one rule of the per-request re-check on every surface.
 */
export function tokenStanding(claims: TokenClaims, account: AccountRow | undefined): 'ok' | 'revoked' | 'membership_inactive' {
  const standing = account && accountStanding(account);
  if (
    !account ||
    standing === 'inactive' ||
    account.workspace_id !== claims.ws ||
    account.organization_id !== claims.org ||
    (account.tokens_not_before !== null && claims.iat < account.tokens_not_before.getTime())
  ) {
    return 'revoked';
  }
  return standing === 'membership_inactive' ? 'membership_inactive' : 'ok';
}

/** The caller as the account is stored now; only for an account whose tokenStanding is 'ok'. */
export function principalOf(claims: TokenClaims, account: AccountRow): Principal {
  const held = new Set(account.scopes);
  return {
    credentialId: account.id,
    organizationId: account.organization_id,
    workspaceId: account.workspace_id,
    membershipId: account.membership_id,
    userId: account.user_id,
    role: account.role,
    scopes: new Set(claims.scp.filter((s) => held.has(s))),
  };
}

/** The re-check of every request: the account as stored now against what the token claims. */
export function principalFromAccount(claims: TokenClaims, account: AccountRow | undefined): Principal {
  const standing = tokenStanding(claims, account);
  if (standing === 'revoked') throw invalidToken(true);
  // A token of an account whose membership was deactivated is still its own: 403, not 401.
  if (standing === 'membership_inactive') throw new AppError('forbidden', 'The run-as membership of this service account is inactive');
  return principalOf(claims, account!);
}

/**
 * Why a present bearer token is refused, in words a caller can act on (an expired one is
 * exchanged again; an invalid one never works); undefined when there is no token at all.
 */
export function bearerProblem(signingKey: Buffer, authorization: string | undefined, nowSeconds: number): string | undefined {
  if (!authorization) return undefined;
  const match = BEARER_RE.exec(authorization);
  if (match && tokenExpired(signingKey, match[1]!, nowSeconds)) return 'the bearer token has expired';
  return 'the bearer token is invalid';
}
