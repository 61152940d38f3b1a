import { IdempotentMethod, IdempotentMethodOptions } from '../../lib';

/** Applies `@IdempotentMethod(options)` to `Payments.pay`, as loading a class that carries it does. */
export function appliedTo(options: IdempotentMethodOptions): () => void {
  return () => {
    class Payments {
      pay(): void {}
    }
    IdempotentMethod(options)(Payments.prototype, 'pay', Object.getOwnPropertyDescriptor(Payments.prototype, 'pay')!);
  };
}
