import 'reflect-metadata';
import './operations/telemetry'; // first: metrics are registered before the library starts
import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import { AppModule } from './app.module';

async function bootstrap(): Promise<void> {
  const app = await NestFactory.create(AppModule);
  app.enableShutdownHooks();
  // Swagger UI at /docs: the routes the interceptor acts on show the Idempotency-Key header and their 409/422 problems.
  SwaggerModule.setup('docs', app, () => SwaggerModule.createDocument(app, new DocumentBuilder().setTitle('sample app').addBearerAuth().build()));
  const port = Number(process.env.PORT ?? 3000);
  const host = process.env.HOST; // e.g. 127.0.0.1; unset listens on every interface
  await (host ? app.listen(port, host) : app.listen(port));
  new Logger('Bootstrap').log(`sample app listening on ${await app.getUrl()}`);
}

bootstrap().catch((err: unknown) => {
  new Logger('Bootstrap').error(err instanceof Error ? err.stack : String(err));
  process.exit(1);
});
