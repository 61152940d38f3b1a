// Issue 7 item 1: a replay sends exactly the bytes the first response sent, whatever serializing interceptor runs
// around the idempotency interceptor and however it is registered. The entity's @Exclude()d field must appear
// neither in the first response, nor in the replay, nor in the stored record.
import {
  Body, ClassSerializerInterceptor, Controller, INestApplication, Module, Post, Provider, Type, UseInterceptors,
} from '@nestjs/common';
import { APP_INTERCEPTOR, Reflector } from '@nestjs/core';
import { Exclude } from 'class-transformer';
import { Harness, HarnessOptions, Runs, startApp } from '../support/http-harness';
import { ADAPTERS } from '../support/test-app';

const SECRET = 'argon2id$never-on-the-wire';

class UserEntity {
  id!: number;
  email!: string;
  @Exclude()
  passwordHash!: string;

  constructor(fields: Partial<UserEntity>) {
    Object.assign(this, fields);
  }
}

@Controller('users')
class UsersController {
  constructor(private readonly runs: Runs) {}

  @Post()
  create(@Body() body: { email: string }) {
    return new UserEntity({ id: this.runs.inc('users'), email: body.email, passwordHash: SECRET });
  }
}

@Controller('serialized-users')
@UseInterceptors(ClassSerializerInterceptor)
class SerializedUsersController {
  constructor(private readonly runs: Runs) {}

  @Post()
  create(@Body() body: { email: string }) {
    return new UserEntity({ id: this.runs.inc('users'), email: body.email, passwordHash: SECRET });
  }
}

const SERIALIZER: Provider = { provide: APP_INTERCEPTOR, useClass: ClassSerializerInterceptor };

@Module({ providers: [SERIALIZER] })
class SerializerModule {}

/** Every way Nest allows to register the serializer, with the controller it applies to. */
const REGISTRATIONS: [string, Type<unknown>, Partial<HarnessOptions>][] = [
  ['APP_INTERCEPTOR in a module imported before IdempotencyModule', UsersController, { importsBefore: [SerializerModule] }],
  ['APP_INTERCEPTOR in a module imported after IdempotencyModule', UsersController, { importsAfter: [SerializerModule] }],
  ["APP_INTERCEPTOR in the app module's own providers", UsersController, { providers: [SERIALIZER] }],
  ['app.useGlobalInterceptors()', UsersController, {
    configure: (app: INestApplication) => app.useGlobalInterceptors(new ClassSerializerInterceptor(app.get(Reflector))),
  }],
  ['@UseInterceptors() on the controller', SerializedUsersController, {}],
];

describe.each(ADAPTERS)('a replay sends the serialized bytes of the first response (%s)', (adapter) => {
  describe.each(REGISTRATIONS)('ClassSerializerInterceptor as %s', (_way, controller, registration) => {
    let h: Harness;
    const path = controller === UsersController ? '/users' : '/serialized-users';

    beforeAll(async () => {
      h = await startApp({ adapter, controllers: [controller], ...registration });
    });
    afterAll(() => h?.close());

    it('hides the excluded field the first time, on the replay and in the stored record', async () => {
      const send = () => h.http().post(path).set('Idempotency-Key', 'user-1').send({ email: 'zoe@example.com' });
      const first = await send();
      expect(first.status).toBe(201);
      expect(JSON.parse(first.text)).toEqual({ id: 1, email: 'zoe@example.com' });

      const replay = await send();
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.status).toBe(201);
      expect(replay.text).toBe(first.text);
      expect(replay.headers['content-type']).toBe(first.headers['content-type']);
      expect(replay.text).not.toContain(SECRET);
      expect(h.runs('users')).toBe(1);

      const [record] = await h.records('user-1');
      expect(record.status).toBe('completed');
      expect(JSON.stringify(record.result)).not.toContain(SECRET);
    });
  });
});
