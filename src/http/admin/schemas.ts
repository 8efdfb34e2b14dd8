/**
 * The operator API's schema pieces, as TypeBox schemas whose static types are the handlers' body
 * and params types (@fastify/type-provider-typebox); those partner routes share are src/http/schemas.ts's.
 */
import { type Static, type TObject, type TProperties, Type } from 'typebox';
import { MAX_EMAIL_LENGTH, MAX_NAME_LENGTH, NAME_PATTERN } from '../../resources/text.ts';
import { nullable, uuid } from '../schemas.ts';

export const name = Type.String({ maxLength: MAX_NAME_LENGTH, pattern: NAME_PATTERN });
/** Never blank, as a partner's optional text is not: null leaves it empty (a blank `short_name` was stored as ""). */
export const optionalText = Type.Optional(nullable(name));
export const email = Type.String({ format: 'idn-email', maxLength: MAX_EMAIL_LENGTH });
export const date = Type.String({ format: 'date' });
export const idParams = Type.Object({ id: uuid });

/** A body that names every field it accepts. */
export const closedBody = <P extends TProperties>(properties: P) =>
  Type.Object(properties, { additionalProperties: false });

/** A body that may also be left out (null): the call then takes its defaults. */
export const optionalBody = <T extends TObject>(body: T) => Type.Unsafe<Static<T> | null>({ ...body, type: ['object', 'null'] });

/** No body, or an empty object: the call takes nothing. */
export const noBody = optionalBody(closedBody({}));
