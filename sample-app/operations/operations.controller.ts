import { Controller, Get, Req, Res } from '@nestjs/common';
import { HealthCheck, HealthCheckService } from '@nestjs/terminus';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { IdempotencyHealthIndicator } from '../../lib';
import { Public } from '../auth/public.decorator';
import { prometheusExporter } from './telemetry';

/** `/metrics` for Prometheus and `/health` for the orchestrator; both public, as their scrapers carry no token. */
@Controller()
@Public()
export class OperationsController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly idempotency: IdempotencyHealthIndicator,
  ) {}

  @Get('metrics')
  metrics(@Req() req: IncomingMessage, @Res() res: ServerResponse): void {
    prometheusExporter.getMetricsRequestHandler(req, res);
  }

  @Get('health')
  @HealthCheck()
  check() {
    return this.health.check([() => this.idempotency.isHealthy()]);
  }
}
