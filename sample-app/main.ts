import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module';

async function bootstrap(): Promise<void> {
  const app = await NestFactory.create(AppModule);
  app.enableShutdownHooks();
  const port = Number(process.env.PORT ?? 3000);
  const host = process.env.HOST; // e.g. 127.0.0.1; unset listens on every interface
  await (host ? app.listen(port, host) : app.listen(port));
  new Logger('Bootstrap').log(`sample app listening on ${await app.getUrl()}`);
}

bootstrap().catch((err: unknown) => {
  new Logger('Bootstrap').error(err instanceof Error ? err.stack : String(err));
  process.exit(1);
});
