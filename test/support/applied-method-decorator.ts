import { IdempotentMethod, IdempotentMethodOptions } from '../../lib';

/** Applies `decorator` to `Payments.pay`, as loading a class that carries it does. */
export function appliedToPaymentsPay(decorator: MethodDecorator): () => void {
  return () => {
    class Payments {
      pay(): void {}
    }
    decorator(Payments.prototype, 'pay', Object.getOwnPropertyDescriptor(Payments.prototype, 'pay')!);
  };
}

/** Applies `@IdempotentMethod(options)` to `Payments.pay`, as loading a class that carries it does. */
export function appliedTo(options: IdempotentMethodOptions): () => void {
  return appliedToPaymentsPay(IdempotentMethod(options));
}
