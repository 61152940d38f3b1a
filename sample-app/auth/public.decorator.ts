import { SetMetadata } from '@nestjs/common';

/** Metadata key of `@Public()`. */
export const IS_PUBLIC = 'sample-app:public';

/** Lets a route through without a bearer token (it must authenticate its caller another way). */
export const Public = (): ClassDecorator & MethodDecorator => SetMetadata(IS_PUBLIC, true);
