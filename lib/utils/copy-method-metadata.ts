/** Copies every reflect-metadata entry of `from` onto `to`, so decorators read a wrapper like the original. */
export function copyMethodMetadata(from: object, to: object): void {
  for (const key of Reflect.getMetadataKeys(from)) {
    Reflect.defineMetadata(key, Reflect.getMetadata(key, from), to);
  }
}
