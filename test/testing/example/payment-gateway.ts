import { Injectable } from '@nestjs/common';

/** The external payment API of the example; the tests replace it with their own fake, as users would. */
@Injectable()
export class PaymentGateway {
  charge(_orderId: string, _amount: number, _idempotencyKey: string): Promise<string> {
    return Promise.reject(new Error('PaymentGateway is not available in unit tests: provide a fake'));
  }
}
