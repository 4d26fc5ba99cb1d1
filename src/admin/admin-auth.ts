/** The admin API's authenticator: the admin token as a bearer, compared in constant time. */
import { AppError } from '../errors.ts';
import { secretsEqual } from '../secrets.ts';

export function authenticateAdmin(adminToken: string, authorization: string | undefined): void {
  const m = authorization ? /^Bearer (\S+)$/i.exec(authorization) : null;
  if (!m || !secretsEqual(m[1]!, adminToken)) {
    throw new AppError('unauthorized', 'A valid admin token is required', { headers: { 'www-authenticate': 'Bearer realm="admin"' } });
  }
}
